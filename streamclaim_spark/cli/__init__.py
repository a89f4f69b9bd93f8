"""The console scripts, one module each: streamclaim-recover, streamclaim-server, streamclaim-import."""

from __future__ import annotations
