"""The layer order of docs/architecture.md, read off the imports.

Each stage imports only itself and the stages before it, and no two modules
import each other through any chain — imports inside functions count too,
since a cycle that only closes at run time is still a cycle. Imports under
`if TYPE_CHECKING:` are for annotations and do not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "presk"

# Earliest first. A group is a subpackage of presk/ or a module at its top.
LAYERS: list[set[str]] = [
    {"presk", "diagnostics", "dtypes", "names", "machine", "resources"},
    {"syntax"},
    {"elab"},
    {"core"},
    {"types"},
    {"ad"},
    {"interp"},
    {"data"},
    {"entries"},
    {"kernel"},
    {"sched"},
    {"host"},
    {"cgen"},
    {"build"},
    {"backends"},
    {"pipeline"},
    {"tune"},
    {"train"},
    {"serve"},
    {"export"},
    {"api"},
    {"commands"},
    {"cli"},
    {"__main__"},  # `python -m presk`: the command line
]


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _group(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "presk"


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path) -> set[str]:
    """The presk modules a file imports (a `from pkg import name` counts pkg.name if a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    here = _module(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "presk")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base.split(".")[0] == "presk":
                # `from pkg import sub` runs pkg's __init__ first: it imports pkg too.
                found.add(base)
                for alias in node.names:
                    candidate = f"{base}.{alias.name}"
                    if candidate in MODULES:
                        found.add(candidate)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(here)
    return found


MODULES = {_module(p) for p in PACKAGE.rglob("*.py")}
GRAPH = {_module(p): _imports(p) for p in PACKAGE.rglob("*.py")}


def _rank(group: str) -> int:
    for i, layer in enumerate(LAYERS):
        if group in layer:
            return i
    raise AssertionError(f"presk/{group} is in no layer of tests/test_layers.py")


def test_every_stage_imports_only_earlier_stages() -> None:
    wrong = []
    for module, imported in sorted(GRAPH.items()):
        for other in sorted(imported):
            if _rank(_group(other)) > _rank(_group(module)):
                wrong.append(f"{module} imports {other}")
    assert not wrong, "a stage imports a later one:\n" + "\n".join(wrong)


def test_no_import_cycles() -> None:
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def walk(module: str) -> None:
        state[module] = 1
        path.append(module)
        for other in sorted(GRAPH.get(module, ())):
            if other not in GRAPH:
                continue
            if state.get(other) == 1:
                cycles.append([*path[path.index(other) :], other])
            elif other not in state:
                walk(other)
        path.pop()
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            walk(module)
    shown = "\n".join(" -> ".join(c) for c in cycles)
    assert not cycles, "import cycles:\n" + shown


def test_the_layer_table_names_every_group() -> None:
    groups = {_group(m) for m in MODULES}
    assert groups <= set().union(*LAYERS), sorted(groups - set().union(*LAYERS))
