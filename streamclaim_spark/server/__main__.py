"""``python -m streamclaim_spark.server``.

The one import from a package up to ``cli/``: this file is an entry point that nothing imports, kept so
the documented ``python -m`` form runs the console script's own ``main`` (``streamclaim_spark.cli.serve``).
"""

from __future__ import annotations

import sys

from streamclaim_spark.cli.serve import main

sys.exit(main())
