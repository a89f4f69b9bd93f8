"""What tests, benchmarks and users' own tests share: counting the Spark jobs a piece of work runs."""

from __future__ import annotations
