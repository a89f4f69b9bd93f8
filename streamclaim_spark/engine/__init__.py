"""The engine: a command as one transaction: snapshot, decide, one guarded commit, retry on a lost race.

The commit is a transaction of files on a classic session (file_commit.py: the writes applied on the
driver to the files they reach, written_rows.py; appends, removals and rewrites in place), and one
guarded MERGE (merge_commit.py) on Spark Connect, for frames of source rows, and for writes reaching
more rows than the driver rewrites.
"""

from __future__ import annotations
