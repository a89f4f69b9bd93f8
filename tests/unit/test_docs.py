"""The docs stay reference: the module paths they name exist, the sections they point at are there, and
README, docs/ and the code hold no commit hash and no dated timing (those belong in CHANGELOG.md and the
results files in docs/benchmarks/). No Spark."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "streamclaim_spark"
# Reference docs: README and docs/*.md. CHANGELOG.md is history and may name commits and dates.
REFERENCE_DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
CODE = [
    path
    for folder in ("streamclaim_spark", "jobs", "bench", "tests", "scripts")
    for path in sorted((REPO / folder).rglob("*.py"))
    if "data" not in path.relative_to(REPO).parts and path != Path(__file__).resolve()
]

# A path a doc names in backticks or bare: folders and a file ending in .py, relative to the repo or the package.
MODULE_PATH = re.compile(r"(?<![\w./-])((?:\.?[\w-]+/)+[\w-]+\.py|(?:[\w-]+/)+(?=[`\s,;).:]|$))")
# A word that may be an abbreviated commit hash: 7 to 40 hex digits with at least one letter and one digit.
HEX_WORD = re.compile(r"(?<![\w./-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-])")
# A calendar date on its own (a timestamp in an example's output, 2026-11-22T04:25:23Z, is not a diary's date).
DATE = re.compile(r"(?<![\w-])20\d\d-[01]\d-[0-3]\d(?![\w:-]|T\d)")
# A pointer at a section of BENCHMARKS.md or CHANGELOG.md: the file, then the section's title in quotes.
SECTION_POINTER = re.compile(
    r"(?P<file>BENCHMARKS\.md|CHANGELOG\.md)(?:'s [\w ]+)?,?[ \t]*(?:\n[ \t]*#?[ \t]*)?\(?\"(?P<title>[^\"]+)\""
)


def _named_paths(doc: Path) -> set[str]:
    return {match.group(1) for match in MODULE_PATH.finditer(doc.read_text(encoding="utf-8"))}


# Where a named path may start: the repo, the package, or a layer's folder (DESIGN's table names `batch/`
# in the engine's row, `claims/in_place.py` in the fleet's).
BASES = (REPO, PACKAGE, *sorted(folder for folder in PACKAGE.iterdir() if (folder / "__init__.py").exists()))


def _exists(named: str) -> bool:
    return any((base / named).exists() for base in BASES)


@pytest.mark.parametrize("doc", ["README.md", "docs/DESIGN.md"])
def test_every_module_path_the_doc_names_exists(doc: str) -> None:
    named = _named_paths(REPO / doc)

    assert len(named) > 20 and "state/delta_txn.py" in named
    assert sorted(path for path in named if not _exists(path)) == []


def test_the_module_path_check_sees_a_path_that_is_gone(tmp_path: Path) -> None:
    doc = tmp_path / "DOC.md"
    doc.write_text("The commit is in `engine/transaction.py` and `engine/gone_module.py`, claims in fleet/claims/.\n")

    named = _named_paths(doc)

    assert named == {"engine/transaction.py", "engine/gone_module.py", "fleet/claims/"}
    assert [path for path in sorted(named) if not _exists(path)] == ["engine/gone_module.py"]


def _commits_among(words: set[str]) -> set[str]:
    """The words that name a commit of this repository (``git cat-file`` peels each to a commit)."""
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        pytest.skip("no git repository to resolve commit hashes against")
    ordered = sorted(words)
    answer = subprocess.run(
        [git, "-C", str(REPO), "cat-file", "--batch-check"],
        input="".join(f"{word}^{{commit}}\n" for word in ordered),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return {word for word, line in zip(ordered, answer, strict=True) if line.endswith(" commit") or " commit " in line}


def _hex_words(paths: list[Path]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in paths:
        for word in HEX_WORD.findall(path.read_text(encoding="utf-8")):
            found.setdefault(word, set()).add(str(path.relative_to(REPO)))
    return found


def test_reference_docs_and_code_name_no_commit() -> None:
    words = _hex_words([*REFERENCE_DOCS, *CODE])

    commits = _commits_among(set(words))

    assert {word: sorted(words[word]) for word in sorted(commits)} == {}


def test_the_commit_check_recognises_a_commit_of_this_repository() -> None:
    # A recent commit whose short hash reads as a hex word: one of digits only (HEAD's, now and then)
    # passes for a number, as it would in the docs.
    command = ["git", "-C", str(REPO), "log", "-n", "50", "--format=%h", "--abbrev=7"]
    hashes = subprocess.run(command, capture_output=True, text=True, check=False).stdout.split()
    words = [word for word in hashes if HEX_WORD.fullmatch(word)]
    if not words:
        pytest.skip("no git repository")
    head = words[0]

    assert HEX_WORD.findall(f"measured at {head}, not at 1700000000000-0 or deadbee0cafe.") == [head, "deadbee0cafe"]
    assert _commits_among({head, "deadbee0cafe"}) == {head}


def test_reference_docs_and_code_hold_no_dated_timing() -> None:
    dated = {
        str(path.relative_to(REPO)): DATE.findall(path.read_text(encoding="utf-8")) for path in [*REFERENCE_DOCS, *CODE]
    }

    assert {path: dates for path, dates in dated.items() if dates} == {}
    assert DATE.findall("took 20.1 minutes on 2026-11-30; started_at 2026-11-22T04:25:23.215Z") == ["2026-11-30"]


def _titles(doc: Path) -> list[str]:
    return [line.lstrip("#").strip() for line in doc.read_text(encoding="utf-8").splitlines() if line.startswith("#")]


def test_every_pointer_at_a_section_of_benchmarks_or_changelog_names_one_that_is_there() -> None:
    titles = {"BENCHMARKS.md": _titles(REPO / "docs" / "BENCHMARKS.md"), "CHANGELOG.md": _titles(REPO / "CHANGELOG.md")}
    pointers = [
        (str(path.relative_to(REPO)), match.group("file"), re.sub(r"\s*\n\s*#?\s*", " ", match.group("title")))
        for path in [*REFERENCE_DOCS, REPO / "CHANGELOG.md", *CODE]
        for match in SECTION_POINTER.finditer(path.read_text(encoding="utf-8"))
    ]

    assert len(pointers) > 40
    missing = [
        (path, file, title)
        for path, file, title in pointers
        if not any(heading.startswith(title) for heading in titles[file])
    ]
    assert missing == []
