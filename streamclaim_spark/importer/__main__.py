"""``python -m streamclaim_spark.importer``: the same as ``streamclaim-import``.

The one import from a package up to ``cli/``: this file is an entry point that nothing imports, kept so
the documented ``python -m`` form runs the console script's own ``main`` (``streamclaim_spark.cli.import_redis``).
"""

from __future__ import annotations

import sys

from streamclaim_spark.cli.import_redis import main

if __name__ == "__main__":
    sys.exit(main())
