"""Where each piece of work runs (core/placement.py): the driver or Spark, by named work and thresholds."""

from __future__ import annotations

import pytest

from streamclaim_spark.core.placement import Form, Placement, Work, placed, placement


def test_work_runs_on_the_driver_up_to_its_row_bound_and_in_spark_past_it() -> None:
    settings = Placement(apply_rows=10)

    assert settings.choose(Work.APPLY, classic=True, rows=10) is Form.DRIVER
    assert settings.choose(Work.APPLY, classic=True, rows=11) is Form.SPARK
    assert settings.rows_max(Work.APPLY) == 10


def test_spark_connect_and_files_past_the_driver_bytes_always_take_spark() -> None:
    settings = Placement(driver_bytes=1_000)

    assert settings.choose(Work.COMMIT, classic=False) is Form.SPARK
    assert settings.choose(Work.READ_FILES, classic=True, stored_bytes=1_001) is Form.SPARK
    assert settings.choose(Work.READ_FILES, classic=True, stored_bytes=1_000) is Form.DRIVER


def test_forcing_spark_takes_spark_for_every_work_and_forcing_the_driver_ignores_row_bounds_but_not_bytes() -> None:
    spark, driver = Placement(force="spark"), Placement(force="driver", apply_rows=1, driver_bytes=100)

    assert {spark.choose(work, classic=True) for work in Work} == {Form.SPARK}
    assert spark.rows_max(Work.PREFETCH) == -1
    assert driver.choose(Work.APPLY, classic=True, rows=10**9) is Form.DRIVER
    assert driver.choose(Work.APPLY, classic=True, stored_bytes=101) is Form.SPARK


def test_a_placed_block_changes_the_process_placement_and_puts_the_one_before_back() -> None:
    before = placement()

    with placed(force="spark", prefetch_rows=5) as inside:
        assert placement() is inside
        assert (inside.force, inside.prefetch_rows, inside.apply_rows) == ("spark", 5, before.apply_rows)

    assert placement() is before


def test_every_bounded_work_names_a_placement_field() -> None:
    settings = Placement()

    for work in Work:
        assert settings.rows_max(work) > 0, work


@pytest.mark.parametrize("force", ["auto", "driver", "spark"])
def test_the_forces_conf_accepts_are_the_three_forms(force: str) -> None:
    from streamclaim_spark.core.placement import parse_force

    assert parse_force(force) == force
