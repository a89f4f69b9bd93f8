"""Spark I/O: the state table's schema and Delta tables, the session, and snapshots read at one version."""

from __future__ import annotations
