"""Each selected group's rule — its policy over the run's options — and Columns that pick a row's rule.

A run classifies every group in one query and commits them in one MERGE whatever their policies
(core/policies.py): an option that differs between groups becomes one Column, a CASE over the rules'
partitions; when every group shares one rule (every run without policies) it is that rule's plain
expression, so such a run plans exactly what it always did.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from streamclaim_spark.core.config import RecoveryOptions
from streamclaim_spark.core.partitions import group_partition
from streamclaim_spark.core.policies import policy_for
from streamclaim_spark.fleet.claims.owners import Pair
from streamclaim_spark.state.schema import in_partitions


@dataclass(frozen=True)
class GroupRules:
    """The run's options and, per selected group, the number of its policy (None: none) and its rule."""

    options: RecoveryOptions
    by_pair: dict[Pair, tuple[int | None, RecoveryOptions]]

    @classmethod
    def of(cls, options: RecoveryOptions, pairs: Sequence[Pair]) -> GroupRules:
        return cls(options, {pair: policy_for(options, *pair) for pair in pairs})

    def rule(self, pair: Pair) -> RecoveryOptions:
        """The options the group is recovered with (the run's, for a group outside the selection)."""
        return self.by_pair[pair][1] if pair in self.by_pair else self.options

    def policy(self, pair: Pair) -> int | None:
        return self.by_pair[pair][0] if pair in self.by_pair else None

    def grouped(self, pairs: Sequence[Pair] | None = None) -> list[tuple[RecoveryOptions, list[Pair]]]:
        """The distinct rules of ``pairs`` (default every group), each with its groups, in first-seen order."""
        groups: dict[RecoveryOptions, list[Pair]] = {}
        for pair in self.by_pair if pairs is None else pairs:
            groups.setdefault(self.rule(pair), []).append(pair)
        return list(groups.items()) or [(self.options, [])]

    def where(self, test: Callable[[RecoveryOptions], bool], pairs: Sequence[Pair] | None = None) -> list[Pair]:
        """The groups among ``pairs`` (default every group) whose rule passes ``test``."""
        return [pair for pair in (self.by_pair if pairs is None else pairs) if test(self.rule(pair))]

    def any(self, test: Callable[[RecoveryOptions], bool], pairs: Sequence[Pair] | None = None) -> bool:
        """Whether the rule of some group among ``pairs`` (default every group) passes ``test``."""
        return bool(self.where(test, pairs))

    def column(self, build: Callable[[RecoveryOptions], Column], pairs: Sequence[Pair] | None = None) -> Column:
        """``build(rule)`` for the rule of each row's group, over the rows of ``pairs`` (default every group).

        One rule: its expression as it is. Several: a CASE whose branches name their groups' partitions
        (one SQL ``IN`` each); the last rule takes the rows no earlier branch names.
        """
        rules = self.grouped(pairs)
        if len(rules) == 1:
            return build(rules[0][0])
        choice: Column | None = None
        for options, members in rules[:-1]:
            names = in_partitions([group_partition(*pair) for pair in members])
            choice = F.when(names, build(options)) if choice is None else choice.when(names, build(options))
        assert choice is not None
        return choice.otherwise(build(rules[-1][0]))
