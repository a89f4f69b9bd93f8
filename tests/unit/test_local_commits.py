"""Which settings a session gets for the local commit classes (state/local_commits.py), and that the store
opens on file:// through them as on Delta's own HDFSLogStore."""

from __future__ import annotations

from pathlib import Path

from streamclaim_spark.core.object_store import MULTI_WRITER, check_writer_safety
from streamclaim_spark.state.local_commits import (
    CHECKPOINT_FILE_MANAGER,
    CHECKPOINT_FILE_MANAGER_KEY,
    FILE_SYSTEM_CHECKPOINT_FILE_MANAGER,
    LOG_STORE,
    LOG_STORE_KEY,
    with_local_commits,
)


def test_with_a_jar_the_session_loads_it_and_names_both_classes(tmp_path: Path) -> None:
    jar = tmp_path / "local-commits.jar"
    jar.write_bytes(b"jar")
    settings = {CHECKPOINT_FILE_MANAGER_KEY: FILE_SYSTEM_CHECKPOINT_FILE_MANAGER, "spark.jars": "/x/a.jar"}
    assert with_local_commits(settings, jar) == {
        LOG_STORE_KEY: LOG_STORE,
        CHECKPOINT_FILE_MANAGER_KEY: CHECKPOINT_FILE_MANAGER,
        "spark.jars": f"/x/a.jar,{jar}",
    }


def test_without_the_jar_file_the_settings_stay_as_they_are(tmp_path: Path) -> None:
    settings = {CHECKPOINT_FILE_MANAGER_KEY: FILE_SYSTEM_CHECKPOINT_FILE_MANAGER}
    assert with_local_commits(settings, tmp_path / "missing.jar") == settings
    assert with_local_commits(settings, None) == settings


def test_a_log_store_or_checkpoint_file_manager_the_user_chose_is_kept(tmp_path: Path) -> None:
    jar = tmp_path / "local-commits.jar"
    jar.write_bytes(b"jar")
    chosen = {"spark.delta.logStore.class": "my.LogStore", CHECKPOINT_FILE_MANAGER_KEY: "my.Manager"}
    assert with_local_commits(chosen, jar) == chosen
    only_log_store = {"delta.logStore.file.impl": "my.LogStore"}
    assert with_local_commits(only_log_store, jar) == {
        **only_log_store,
        CHECKPOINT_FILE_MANAGER_KEY: CHECKPOINT_FILE_MANAGER,
        "spark.jars": str(jar),
    }


def test_the_store_opens_on_file_through_the_link_log_store_with_several_writers_and_no_warning() -> None:
    safety = check_writer_safety("/tmp/streams", {LOG_STORE_KEY: LOG_STORE})
    assert (safety.log_store, safety.mode, safety.warnings) == (LOG_STORE, MULTI_WRITER, ())
