"""``python -m streamclaim_spark.server``."""

from __future__ import annotations

import sys

from streamclaim_spark.cli.serve import main

sys.exit(main())
