"""Batched claims beyond Redis: stale entries of many groups claimed in one Delta transaction.

``selection`` says which pending entries a claim takes and who gets each, ``in_place`` claims them
with one UPDATE where they lie, ``batch`` holds ``claim_stale`` (falling back to one MERGE) and
``claim_batch`` (many Redis-style requests in one commit), ``owners`` what claims and recovery share.
"""

from __future__ import annotations

from streamclaim_spark.core.backoff import parse_backoff
from streamclaim_spark.fleet.claims.claiming import ClaimRequest, claim_batch, claim_stale, requests_from
from streamclaim_spark.fleet.claims.selection import (
    BatchClaim,
    StaleSelection,
    claimed_frame,
    pending_with_fields,
    selected_groups,
)

__all__ = [
    "BatchClaim",
    "ClaimRequest",
    "StaleSelection",
    "claim_batch",
    "claim_stale",
    "claimed_frame",
    "parse_backoff",
    "pending_with_fields",
    "requests_from",
    "selected_groups",
]
