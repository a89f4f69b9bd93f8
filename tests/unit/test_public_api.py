"""The public surface: one exception family, all of it exported at the root, and every import that the
README and docs/ show working as shown."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import streamclaim_spark
from streamclaim_spark import StreamclaimError

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
IMPORT_LINE = re.compile(r"^\s*from (streamclaim_spark[\w.]*) import ([\w, ]+)$", re.MULTILINE)


def _modules() -> list[str]:
    return [
        info.name
        for info in pkgutil.walk_packages(streamclaim_spark.__path__, "streamclaim_spark.")
        if not info.name.endswith("__main__")
    ]


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in _modules():
        module = importlib.import_module(name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == name:
                found[f"{name}.{value.__qualname__}"] = value
    return found


def test_every_exception_class_lives_in_errors_is_in_the_family_and_is_exported_at_the_root() -> None:
    classes = _exception_classes()
    assert {name for name in classes if not name.startswith("streamclaim_spark.errors.")} == set()
    assert {name for name, cls in classes.items() if not issubclass(cls, StreamclaimError)} == set()
    assert {cls.__name__ for cls in classes.values()} - set(streamclaim_spark.__all__) == set()


def _documented_imports() -> list[tuple[str, str, str]]:
    imports = []
    for document in DOCUMENTS:
        for match in IMPORT_LINE.finditer(document.read_text()):
            for name in match.group(2).split(","):
                imports.append((document.name, match.group(1), name.strip().split(" as ")[0]))
    return imports


def test_the_documents_show_imports() -> None:
    assert len(_documented_imports()) >= 5


@pytest.mark.parametrize(("document", "module", "name"), _documented_imports())
def test_every_import_the_documents_show_works(document: str, module: str, name: str) -> None:
    assert hasattr(importlib.import_module(module), name), f"{document}: from {module} import {name}"
