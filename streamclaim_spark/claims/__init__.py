"""Batched claims beyond Redis: stale entries of many groups claimed in one Delta transaction."""
