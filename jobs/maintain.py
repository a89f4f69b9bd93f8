"""spark-submit entry point of the maintenance job (same code as the ``streamclaim-maintain`` console script).

spark-submit --packages io.delta:delta-spark_4.2_2.13:4.4.0 jobs/maintain.py --store PATH --retain 1h
"""

from __future__ import annotations

from streamclaim_spark.cli.maintain import main

if __name__ == "__main__":
    raise SystemExit(main())
