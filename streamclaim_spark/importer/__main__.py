"""``python -m streamclaim_spark.importer``: the same as ``streamclaim-import``."""

from __future__ import annotations

import sys

from streamclaim_spark.cli.import_redis import main

if __name__ == "__main__":
    sys.exit(main())
