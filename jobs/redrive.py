"""spark-submit entry point of the redrive job (same code as the ``streamclaim-redrive`` console script).

spark-submit --packages io.delta:delta-spark_4.2_2.13:4.4.0 jobs/redrive.py --help
"""

from __future__ import annotations

from streamclaim_spark.cli.redrive import main

if __name__ == "__main__":
    raise SystemExit(main())
