"""streamclaim-server: the store behind the Redis protocol, for redis-cli, redis-py and any Redis client.

``server`` accepts connections and serves each in its own thread; ``wire`` reads requests and writes replies
(RESP2 and RESP3); ``connection`` answers the connection-level commands (PING, AUTH, HELLO, CLIENT, COMMAND,
INFO, MULTI ...); ``multi_exec`` queues MULTI/EXEC; ``group_commit`` gathers every connection's data commands
into shared batches. The console script is ``streamclaim_spark.cli.serve`` (also ``python -m
streamclaim_spark.server``).
"""

from __future__ import annotations

from streamclaim_spark.server.server import StreamClaimServer

__all__ = ["StreamClaimServer"]
