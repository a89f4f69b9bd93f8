"""Beyond Redis: batched claims, bulk paths and the recovery job over many streams and groups at once."""

from __future__ import annotations
