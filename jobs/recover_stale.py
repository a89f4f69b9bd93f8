"""spark-submit entry point of the recovery job (same code as the ``streamclaim-recover`` console script).

spark-submit --packages io.delta:delta-spark_4.2_2.13:4.4.0 jobs/recover_stale.py --help
"""

from __future__ import annotations

from streamclaim_spark.cli.recover import main

if __name__ == "__main__":
    raise SystemExit(main())
