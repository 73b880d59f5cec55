"""The shape of the package, enforced (docs/DESIGN.md, "Where new code goes").

Reads the source of ``src/memlane`` (no imports of it needed, except for the error tree):
SQL only in ``store/``, no concrete store class outside ``store/``, layers that point one
way, no import cycle at run time (top-level and function-level imports; ``TYPE_CHECKING``
imports do not run), parts reached through ``mem.parts`` not string keys, command-line
tools only at the edges, and one nested error tree.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

import memlane
from memlane import Memory, errors

PACKAGE = Path(memlane.__file__).parent

#: Layer of each module, lowest first; a module may import only from its own layer or lower.
CORE = frozenset({
    "memlane.errors", "memlane.models", "memlane.tokens", "memlane.text", "memlane.ports",
    "memlane.apikeys", "memlane.config", "memlane.lru", "memlane.notes.models", "memlane.language",
    "memlane.items", "memlane.patterns", "memlane.seed_config", "memlane.bilingual", "memlane.validation",
    "memlane.scoping", "memlane.compounds", "memlane.stopwords", "memlane.user_cache", "memlane.sorted_table", "memlane.processes",
    "memlane.wire",
})
ADAPTERS = ("memlane.store", "memlane.bus", "memlane.sealing", "memlane.search.embedders", "memlane.search.minilm_w8a8", "memlane.search.matrix", "memlane.search.ivf")
FEATURES = ("memlane.context", "memlane.state", "memlane.search", "memlane.notes", "memlane.rooms")
FACADE = frozenset({
    "memlane", "memlane.memory", "memlane.client", "memlane.components", "memlane.parts",
    "memlane.transfer", "memlane.aio", "memlane.surface", "memlane.resume", "memlane.cache_sync",
    "memlane.hot_windows", "memlane.hot_packets",
})
LAYER_NAMES = ("core", "adapters", "features", "facade", "edges")

CONCRETE_STORES = ("SQLiteStore", "InMemoryStore", "PostgresStore")
SQL = re.compile(
    r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX|VIRTUAL)"
    r"|PRAGMA\s+\w+|ALTER\s+TABLE|DROP\s+TABLE)\b",
    re.IGNORECASE | re.DOTALL,
)


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer(module: str) -> int:
    if module in CORE:
        return 0
    if any(_within(module, p) for p in ADAPTERS):
        return 1
    if any(_within(module, p) for p in FEATURES):
        return 2
    if module in FACADE:
        return 3
    return 4


@dataclass(frozen=True)
class Import:
    target: str  # a module of the package
    names: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    tree: ast.Module
    runtime: frozenset[int]  # ids of the nodes that run (not under `if TYPE_CHECKING:`)

    def runs(self, node: ast.AST) -> bool:
        return id(node) in self.runtime


@cache
def modules() -> dict[str, Module]:
    out: dict[str, Module] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                typing_only.update(id(n) for stmt in node.body for n in ast.walk(stmt))
        runtime = frozenset(id(n) for n in ast.walk(tree) if id(n) not in typing_only)
        out[".".join(parts)] = Module(".".join(parts), path, tree, runtime)
    return out


def _resolve(name: str) -> str | None:
    known = modules()
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def runtime_imports(mod: Module) -> list[Import]:
    """Imports that execute (module level or inside functions) of modules of the package."""
    package = mod.name if mod.path.name == "__init__.py" else mod.name.rpartition(".")[0]
    found: list[Import] = []
    for node in ast.walk(mod.tree):
        if not mod.runs(node):
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name)
                if target and target.startswith("memlane"):
                    found.append(Import(target, (), node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                target = full if full in modules() else _resolve(base)
                if target and target.startswith("memlane") and target != mod.name:
                    found.append(Import(target, (alias.name,), node.lineno))
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "importlib.import_module":
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                target = _resolve(arg.value)
                if target:
                    found.append(Import(target, (), node.lineno))
    return found


def outside_store() -> list[Module]:
    return [m for m in modules().values() if not _within(m.name, "memlane.store")]


def test_the_walk_sees_the_package() -> None:
    names = modules()
    assert {"memlane.memory", "memlane.store.sqlite", "memlane.ports", "memlane.cli.main"} <= set(names)
    imports = {i.target for i in runtime_imports(names["memlane.memory"])}
    assert "memlane.store" in imports and "memlane.components" in imports  # function level too
    # TYPE_CHECKING imports are not run-time imports
    assert "memlane.state.tracker" not in {i.target for i in runtime_imports(names["memlane.parts"])}


def test_no_sql_outside_store() -> None:
    offenders = [
        f"{m.name}:{node.lineno}: {node.value[:60]!r}"
        for m in outside_store()
        for node in ast.walk(m.tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value)
        and not _is_docstring(m, node)
    ]
    assert offenders == [], "SQL belongs in src/memlane/store/ (ask the store through a port):\n" + "\n".join(offenders)


def _is_docstring(mod: Module, node: ast.Constant) -> bool:
    for owner in ast.walk(mod.tree):
        if isinstance(owner, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = owner.body
            if body and isinstance(body[0], ast.Expr) and body[0].value is node:
                return True
    return False


def test_no_concrete_store_outside_store() -> None:
    offenders: list[str] = []
    for m in outside_store():
        for imp in runtime_imports(m):
            if imp.target in ("memlane.store.sqlite", "memlane.store.postgres") or any(
                n in CONCRETE_STORES for n in imp.names
            ):
                offenders.append(f"{m.name}:{imp.line} imports {imp.target} {imp.names}")
        for node in ast.walk(m.tree):
            text = ast.unparse(node) if isinstance(node, ast.Call | ast.Compare) else ""
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "isinstance" and any(
                name in text for name in CONCRETE_STORES
            ):
                offenders.append(f"{m.name}:{node.lineno} {text}")
            if isinstance(node, ast.Compare) and ".__name__" in text and "store" in text:
                offenders.append(f"{m.name}:{node.lineno} branches on a store's type name: {text}")
    assert offenders == [], "ask the store for a port, not for its class:\n" + "\n".join(offenders)


def test_layers_point_one_way() -> None:
    offenders = [
        f"{m.name} ({LAYER_NAMES[layer(m.name)]}) imports {imp.target} "
        f"({LAYER_NAMES[layer(imp.target)]}) at line {imp.line}"
        for m in modules().values()
        for imp in runtime_imports(m)
        if layer(imp.target) > layer(m.name)
    ]
    assert offenders == [], "core <- adapters <- features <- facade <- edges:\n" + "\n".join(offenders)


def test_no_runtime_import_cycle() -> None:
    graph = {name: {i.target for i in runtime_imports(m)} - {name} for name, m in modules().items()}
    # Tarjan's strongly connected components, iteratively
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    item = stack.pop()
                    on_stack.discard(item)
                    component.append(item)
                    if item == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    assert cycles == [], f"modules that import each other at run time: {cycles}"


def test_parts_are_typed_attributes_not_string_keys() -> None:
    offenders = [
        f"{m.name}:{node.lineno}"
        for m in modules().values()
        if m.name not in ("memlane.memory", "memlane.parts")
        for node in ast.walk(m.tree)
        if isinstance(node, ast.Attribute) and node.attr == "extensions"
    ]
    assert offenders == [], "use mem.parts.<name> (memlane/parts.py), not mem.extensions:\n" + "\n".join(offenders)
    assert not (PACKAGE / "components.py").read_text(encoding="utf-8").count('":attach"')


def test_command_line_tools_live_at_the_edges() -> None:
    offenders = [
        m.name for m in modules().values()
        if layer(m.name) < 4 and "__main__" in m.path.read_text(encoding="utf-8")
    ]
    assert offenders == [], f"library modules with a command-line entry point (move it under cli/): {offenders}"


def test_errors_nest() -> None:
    assert issubclass(errors.SessionNotFoundError, errors.NotFoundError)
    assert issubclass(errors.LockTimeoutError, errors.MemlaneError)
    assert issubclass(errors.EmbedderError, errors.StorageError)
    for name in dir(errors):
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, Exception) and obj.__module__ == errors.__name__:
            assert issubclass(obj, errors.MemlaneError), name


def _takes_memory(annotation: ast.expr | None) -> bool:
    return annotation is not None and re.search(r"\bMemory\b", ast.unparse(annotation)) is not None


def _functions(tree: ast.AST, prefix: str) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    out: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out.append((f"{prefix}.{node.name}", node))
        elif isinstance(node, ast.ClassDef):
            out.extend(_functions(node, f"{prefix}.{node.name}"))
    return out


def test_features_take_ports_not_memory() -> None:
    taking: set[str] = set()
    for m in modules().values():
        if layer(m.name) != 2:
            continue
        for name, fn in _functions(m.tree, m.name):
            args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
            if any(_takes_memory(a.annotation) for a in args):
                taking.add(name)
        for node in ast.walk(m.tree):  # a record of a feature holding a Memory (dataclass field)
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    if isinstance(stmt, ast.AnnAssign) and _takes_memory(stmt.annotation):
                        taking.add(f"{m.name}.{node.name}.{ast.unparse(stmt.target)}")
    assert sorted(taking) == [], (
        "features take the ports they use (memlane/ports.py: Essentials, SessionStore, ...), "
        "callables, or a narrow Protocol (rooms.anchor.RoomMemory), never the whole Memory "
        "(components.py wires them; code needing many of Memory's operations is facade code, "
        "like resume.py):\n" + "\n".join(sorted(taking))
    )
    importing = [
        m.name for m in modules().values()
        if layer(m.name) == 2 and any(
            isinstance(node, ast.ImportFrom) and node.module == "memlane.memory" for node in ast.walk(m.tree)
        )
    ]
    assert importing == [], f"features that import memlane.memory (even for types): {importing}"


def test_a_memory_part_is_made_on_first_use(tmp_path: Path) -> None:
    """Opening a Memory makes no part; reading one makes it (and those before it)."""
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        assert not mem.parts.built("recall") and not mem.parts.built("notes")
        sid = mem.create_session()
        mem.add(sid, "a message: nothing is made for it")
        assert not mem.parts.built("recall") and not mem.parts.built("state")
        assert mem.parts.state is not None
        assert mem.parts.built("recall") and mem.parts.built("state") and not mem.parts.built("notes")
        mem.flush(60)  # background work makes the rest
        assert mem.parts.built("notes") and mem.parts.built("checkpoints")


def test_the_old_extensions_view_warns_and_still_works(tmp_path: Path) -> None:
    with Memory(tmp_path / "x.db", embedder="none") as mem:
        with pytest.warns(DeprecationWarning, match="mem.parts"):
            view = mem.extensions
        assert view["state"] is mem.parts.state and "indexer" not in view
