"""The pure core: stream IDs, Redis integer parsing, replies, the state as plain values, config. No Spark."""

from __future__ import annotations
