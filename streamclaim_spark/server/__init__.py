"""streamclaim-server: the store behind the Redis protocol, for redis-cli, redis-py and any Redis client.

``server`` accepts connections and serves each in its own thread; ``commands`` answers the connection-level
commands (PING, AUTH, HELLO, CLIENT, COMMAND, INFO, MULTI ...); ``transactions`` queues MULTI/EXEC;
``group_commit`` gathers every connection's data commands into shared batches; ``main`` is the console script.
"""

from __future__ import annotations

from streamclaim_spark.server.main import main
from streamclaim_spark.server.server import StreamClaimServer

__all__ = ["StreamClaimServer", "main"]
