"""Bulk paths for data that is already a DataFrame: append, create groups, deliver and acknowledge many entries.

Each call is one guarded commit, like a single command: on a classic session a transaction of files
(engine/file_commit.py: new entries and a delivery's PEL rows written as files of their own,
acknowledged rows removed from the files holding them, heads rewritten on the driver), on Spark Connect
one guarded MERGE. ``append`` assigns IDs as a run of ``XADD *`` would (one millisecond, consecutive
sequence numbers), ``create_groups`` does what many ``XGROUP CREATE`` do, ``deliver`` what
``XREADGROUP ... >`` does for up to ``count`` entries, ``acknowledge`` what ``XACK`` does and
``acknowledge_and_delete`` what ``XACKDEL`` does, for any number of IDs (up to the placement's
``Work.ACK_IDS`` of them held on the driver, more through Spark); entries' payloads never reach the driver.
"""

from __future__ import annotations

from streamclaim_spark.fleet.bulk.ack import BulkAck, BulkAckDel, acknowledge, acknowledge_and_delete
from streamclaim_spark.fleet.bulk.append import BulkAppend, append, fields_column
from streamclaim_spark.fleet.bulk.create_groups import NewGroup, create_groups
from streamclaim_spark.fleet.bulk.deliver import BulkDelivery, deliver, deliver_many, plan_deliveries

__all__ = [
    "BulkAck",
    "BulkAckDel",
    "BulkAppend",
    "BulkDelivery",
    "NewGroup",
    "acknowledge",
    "acknowledge_and_delete",
    "append",
    "create_groups",
    "deliver",
    "deliver_many",
    "fields_column",
    "plan_deliveries",
]
