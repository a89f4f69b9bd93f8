"""Names shared by every module: row kinds and column names of the state table, defaults with reasons."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# ``extra`` of a log line that is a step of long work (a recovery commit, a table maintained): a console
# script shows such lines on the console, the others only in its log file (cli/console.py).
PROGRESS: Mapping[str, object] = MappingProxyType({"progress": True})

# The one Delta table that holds all stream and consumer-group state (see docs/DESIGN.md).
STATE_TABLE_DIR = "state"
# Append-only companions written by the recovery job.
DEAD_LETTER_TABLE_DIR = "dead_letters"
RECOVERY_RUNS_TABLE_DIR = "recovery_runs"
# Written by the redrive job: one row per run.
REDRIVE_RUNS_TABLE_DIR = "redrive_runs"
# Written by StreamStore.give_up: the reason a consumer gave with XNACK FATAL, for its dead letter.
GIVE_UP_REASONS_TABLE_DIR = "give_up_reasons"

# Most rows a commit writes into one data file, by default (StreamStore.open's rows_per_file, and the
# files upgrade_layout rewrites). 100k pending rows make a ~0.4 MB file, 100k entries of a few short
# fields ~1.2 MB.
DEFAULT_ROWS_PER_FILE = 100_000

# Row kinds. Each partition has exactly one "head" row (stream or group) that every write checks and bumps.
KIND_STREAM = "stream"
KIND_ENTRY = "entry"
KIND_GROUP = "group"
KIND_CONSUMER = "consumer"
KIND_PENDING = "pending"
HEAD_KINDS = (KIND_STREAM, KIND_GROUP)

# Column names of the state table.
PARTITION_ID = "partition_id"
# The Delta partition column: a few leading characters of partition_id (schema.bucket_of).
BUCKET = "bucket"
ROW_KIND = "row_kind"
STREAM = "stream"
GROUP = "group_name"
ID_MS = "id_ms"
ID_SEQ = "id_seq"
CONSUMER = "consumer"
FIELDS = "fields"
OWNER = "owner"
DELIVERY_TIME_MS = "delivery_time_ms"
DELIVERY_COUNT = "delivery_count"
SEEN_TIME_MS = "seen_time_ms"
ACTIVE_TIME_MS = "active_time_ms"
LAST_MS = "last_ms"
LAST_SEQ = "last_seq"
ENTRIES_READ = "entries_read"
ENTRIES_ADDED = "entries_added"
ENTRY_COUNT = "entry_count"
FIRST_MS = "first_ms"
FIRST_SEQ = "first_seq"
MAX_DELETED_MS = "max_deleted_ms"
MAX_DELETED_SEQ = "max_deleted_seq"
# Stream head: true when a PEL row may name an entry the stream no longer holds (docs/DESIGN.md, "Kept markers").
SOME_DELETED = "some_deleted"
GROUP_NAMES = "group_names"
VERSION = "version"
# Consumer rows: the entries the consumer owns; group head: the group's PEL size. Exact only while the
# group head's COUNTED_VERSION equals its VERSION (docs/DESIGN.md, "Kept counts").
PENDING_COUNT = "pending_count"
# Group head: the VERSION at which the group's kept counts were last made exact.
COUNTED_VERSION = "counted_version"
TXN = "txn"

# The columns that identify a row inside its partition (compared null-safely in every MERGE).
KEY_COLUMNS = (PARTITION_ID, ROW_KIND, ID_MS, ID_SEQ, CONSUMER)

# Redis' XAUTOCLAIM default COUNT and its upper bound (LONG_MAX / 16, see t_stream.c).
XAUTOCLAIM_DEFAULT_COUNT = 100
XAUTOCLAIM_MAX_COUNT = 576460752303423487
# XAUTOCLAIM examines at most COUNT x this many PEL entries per call.
XAUTOCLAIM_ATTEMPTS_FACTOR = 10
# XINFO STREAM FULL lists this many entries/PEL items unless COUNT says otherwise.
XINFO_FULL_DEFAULT_COUNT = 10
# Redis' entries_read sentinel for "unknown" (reported as nil).
ENTRIES_READ_UNKNOWN = -1
# Redis' active_time for a consumer that never read or claimed anything.
NEVER_ACTIVE = -1
