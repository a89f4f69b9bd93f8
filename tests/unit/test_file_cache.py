"""The driver's copies of a remote table's small data files (state/file_cache.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamclaim_spark.state import file_cache


@pytest.fixture(autouse=True)
def empty_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_cache, "_copies", type(file_cache._copies)())
    monkeypatch.setattr(file_cache, "_held", [0])


def written(path: Path, size: int) -> str:
    path.write_bytes(bytes(size))
    return str(path)


def test_a_kept_file_is_copied_back_by_its_location_and_an_unknown_one_is_not(tmp_path: Path) -> None:
    file_cache.keep("s3a://b/t/h1.parquet", written(tmp_path / "up", 100))

    assert file_cache.take("s3a://b/t/h1.parquet", str(tmp_path / "back"))
    assert (tmp_path / "back").read_bytes() == bytes(100)
    assert not file_cache.take("s3a://b/t/h2.parquet", str(tmp_path / "other"))
    assert not (tmp_path / "other").exists()


def test_the_least_recently_used_copies_go_first_once_the_bytes_are_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_cache, "CACHE_BYTES", 250)
    monkeypatch.setattr(file_cache, "_KEPT_FILE_BYTES", 100)
    for name in ("a", "b"):
        file_cache.keep(f"s3a://b/{name}", written(tmp_path / name, 100))
    assert file_cache.take("s3a://b/a", str(tmp_path / "a-back"))  # a is now the most recently used

    file_cache.keep("s3a://b/c", written(tmp_path / "c", 100))

    assert [file_cache.take(f"s3a://b/{name}", str(tmp_path / f"{name}-2")) for name in "abc"] == [True, False, True]
    assert file_cache._held == [200]


def test_a_file_larger_than_a_tenth_of_the_cache_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_cache, "_KEPT_FILE_BYTES", 100)

    file_cache.keep("s3a://b/big", written(tmp_path / "big", 101))

    assert not file_cache.take("s3a://b/big", str(tmp_path / "back"))


def test_a_copy_evicted_while_it_is_taken_counts_as_not_kept(tmp_path: Path) -> None:
    file_cache.keep("s3a://b/gone", written(tmp_path / "up", 10))
    copy, _ = file_cache._copies["s3a://b/gone"]
    Path(copy).unlink()  # as another thread's eviction removes it between the lookup and the copy

    assert not file_cache.take("s3a://b/gone", str(tmp_path / "back"))
