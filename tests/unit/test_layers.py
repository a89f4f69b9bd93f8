"""The package's house in layers (docs/DESIGN.md, "Layout"), held by reading every module's imports.

A module's top folder is its layer (``core/`` pure, ``state/`` Spark I/O, ``engine/``, ``commands/``,
``fleet/`` beyond Redis, then the edges); a module imports only its own layer or lower ones, never in a
circle. Imports inside functions count (they run too); imports under ``if TYPE_CHECKING:`` do not (they
never run). Relative imports are banned by ruff (TID252), so every import is read here by its full name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "streamclaim_spark"
MAX_LINES = 400
# A function longer than this (from `def` to its end, docstring excluded) says why, in a `# Long:` comment.
MAX_FUNCTION_LINES = 60

# Lowest first. A module's layer is its top folder under streamclaim_spark; the package root holds the
# exception family (below everything, since every layer raises it) and the facade's edge modules.
LAYERS: dict[str, tuple[str, ...]] = {
    "errors": ("errors",),
    "pure core": ("core",),
    "spark i/o": ("state",),
    "engine": ("engine",),
    "commands": ("commands",),
    "beyond redis": ("fleet",),
    "edges": ("", "store", "pipeline", "sql", "metrics", "demo", "server", "streaming", "importer", "cli", "testing"),
}
PURE = ("errors", "pure core")
SPARK_PACKAGES = ("pyspark", "delta", "py4j")

# Each module: what it imports, and its length in lines.
House = dict[str, tuple[set[str], int]]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer_of(module: str) -> int:
    top = module.split(".")[0]
    for rank, places in enumerate(LAYERS.values()):
        if top in places:
            return rank
    raise AssertionError(
        f"streamclaim_spark.{module or '__init__'} lies in no layer's folder: move it into one, or add its "
        f"folder to LAYERS in {__file__}"
    )


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, modules: set[str]) -> set[str]:
    """Every module an import runs: ours by dotted name ("" for the package's facade), others by top package."""
    ours: set[str] = set()
    others: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                _note(alias.name, ours, others)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            base = node.module.removeprefix("streamclaim_spark").removeprefix(".")
            if not node.module.startswith("streamclaim_spark"):
                others.add(node.module.split(".")[0])
            for alias in node.names:
                # ``from streamclaim_spark.commands import claim`` runs the submodule claim; importing
                # a name that is not a submodule runs the module (or package facade) that defines it.
                submodule = f"{base}.{alias.name}".lstrip(".")
                if node.module.startswith("streamclaim_spark") and submodule in modules:
                    ours.add(submodule)
                elif node.module.startswith("streamclaim_spark"):
                    ours.add(base)
        stack.extend(ast.iter_child_nodes(node))
    return ours | others


def _note(name: str, ours: set[str], others: set[str]) -> None:
    if name == "streamclaim_spark" or name.startswith("streamclaim_spark."):
        ours.add(name.removeprefix("streamclaim_spark").removeprefix("."))
    else:
        others.add(name.split(".")[0])


@pytest.fixture(scope="module")
def house() -> House:
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {
        name: (_imports(ast.parse(path.read_text()), modules), len(path.read_text().splitlines()))
        for name, path in paths.items()
    }


def test_every_module_has_a_layer_and_imports_only_its_own_or_lower_ones(house: House) -> None:
    upward = [
        f"{name or '__init__'} ({list(LAYERS)[_layer_of(name)]}) imports {target} ({list(LAYERS)[_layer_of(target)]})"
        for name, (imports, _) in house.items()
        for target in imports
        if target in house and _layer_of(target) > _layer_of(name)
    ]
    assert upward == []


def test_the_pure_core_imports_no_spark(house: House) -> None:
    core = {name: imports for name, (imports, _) in house.items() if list(LAYERS)[_layer_of(name)] in PURE}
    assert {
        name: sorted(imports & set(SPARK_PACKAGES)) for name, imports in core.items() if imports & set(SPARK_PACKAGES)
    } == {}


def test_no_module_imports_another_that_imports_it_back(house: House) -> None:
    graph = {
        name: {target for target in imports if target in house and target != name}
        for name, (imports, _) in house.items()
    }
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                circles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert circles == []


def test_no_module_is_longer_than_four_hundred_lines(house: House) -> None:
    assert {name: lines for name, (_, lines) in house.items() if lines > MAX_LINES} == {}


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from ``def`` to the function's end, its docstring left out."""
    assert node.end_lineno is not None
    lines = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        assert first.end_lineno is not None
        lines -= first.end_lineno - first.lineno + 1
    return lines


def _comment_above(source: list[str], line: int) -> str:
    """The comment block that ends right above 1-based ``line`` (its lines joined), or ""."""
    block: list[str] = []
    index = line - 2
    while index >= 0 and source[index].strip().startswith("#"):
        block.insert(0, source[index].strip())
        index -= 1
    return " ".join(block)


def _long_functions_without_a_reason(path: Path) -> list[str]:
    text = path.read_text()
    source = text.splitlines()
    module = _module_name(path)
    offenders: list[str] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}.{child.name}"
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) and _body_lines(child) > MAX_FUNCTION_LINES:
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                if not _comment_above(source, first).startswith("# Long:"):
                    offenders.append(name)
            visit(child, name)

    visit(ast.parse(text), f"streamclaim_spark.{module}".rstrip("."))
    return offenders


def test_every_function_over_sixty_lines_says_why_it_is_long() -> None:
    """A function whose body (docstring excluded) is over 60 lines is split into named steps, or carries a
    comment starting ``# Long:`` right above its ``def`` (or first decorator) giving the reason it is one
    piece; offenders are listed by dotted name."""
    offenders = [name for path in sorted(PACKAGE.rglob("*.py")) for name in _long_functions_without_a_reason(path)]
    assert offenders == []
