"""spark-submit entry point of the import (same code as the ``streamclaim-import`` console script).

spark-submit --packages io.delta:delta-spark_4.2_2.13:4.4.0 jobs/import_redis.py --from redis://host:6379 --store PATH
"""

from __future__ import annotations

from streamclaim_spark.cli.import_redis import main

if __name__ == "__main__":
    raise SystemExit(main())
