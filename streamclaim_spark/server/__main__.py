"""``python -m streamclaim_spark.server``."""

from __future__ import annotations

import sys

from streamclaim_spark.server.main import main

sys.exit(main())
