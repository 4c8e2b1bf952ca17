"""The package's import graph, read from the source with `ast` (nothing is imported): no module imports itself
through others (an import circle), and nothing outside `kimi_eagle_data.cli` imports the CLI (the CLI sits on
top: it parses options and prints; everything else works without it).

Every import counts, wherever it stands: at the top, inside a function (a lazy import still makes the two
modules depend on each other) or under `if TYPE_CHECKING:` (a reader still has to read both together)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:   # pragma: no cover - the project's Python 3.10 path
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "kimi_eagle_data"

# Entry points above the CLI: `python -m kimi_eagle_data` runs the CLI's main.
ENTRY_POINTS = {"kimi_eagle_data.__main__"}


def package_dirs(root: Path) -> dict[str, Path]:
    """Package name -> its folder, as pyproject.toml maps them (some subpackages live outside the package)."""
    cfg = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    mapped = cfg.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    return {name: root / folder for name, folder in mapped.items()} or {PACKAGE: root / PACKAGE}


def module_files(dirs: dict[str, Path]) -> dict[str, Path]:
    """Module name -> file for every .py file of the package (folders that are not importable names, such as
    model assets, are skipped)."""
    out: dict[str, Path] = {}
    # Deeper mappings win: a subpackage mapped to its own folder is named from that mapping.
    for pkg, folder in sorted(dirs.items(), key=lambda kv: kv[0].count(".")):
        for f in folder.rglob("*.py"):
            parts = list(f.relative_to(folder).with_suffix("").parts)
            if not all(p.isidentifier() for p in parts):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([pkg, *parts])] = f
    return out


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package's modules that module `name` imports (an imported name that is a submodule counts as it)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:    # relative: from the module's own package, up `level - 1` more
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            targets = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in modules:     # `import a.b.c` where only a.b is ours, etc.
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    files = module_files(package_dirs(root))
    names = set(files)
    return {name: imports_of(name, path, names) for name, path in files.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module, each as one circle through it (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_through(sorted(g)[0], g, graph) for g in groups]


def _cycle_through(start: str, group: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest path start -> … -> start inside the group (breadth first), to name the circle."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & group):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w not in came_from:
                    came_from[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{sorted(group)} is not a circle")   # pragma: no cover - Tarjan groups are


def upward_imports(graph: dict[str, set[str]], top: str = f"{PACKAGE}.cli") -> list[str]:
    """`a -> b` for each module outside `top` (and not an entry point) that imports a module of `top`."""
    def inside(m: str) -> bool:
        return m == top or m.startswith(top + ".")
    return [f"{a} -> {b}" for a in sorted(graph) if not inside(a) and a not in ENTRY_POINTS
            for b in sorted(graph[a]) if inside(b)]


# -- the package -------------------------------------------------------------------------------------

GRAPH = import_graph()


def test_the_walk_sees_the_package():
    assert len(GRAPH) > 60
    assert "kimi_eagle_data.formats.kimi_k2.grammar" in GRAPH["kimi_eagle_data.formats.kimi_k2.validator"]
    assert "kimi_eagle_data.formats.kimi_k2.grammar" in GRAPH["kimi_eagle_data.formats.kimi_k2.rules"]
    assert "kimi_eagle_data.sources.partitions" in GRAPH["kimi_eagle_data.cli.options"]   # a remapped folder
    assert "kimi_eagle_data.formats.kimi_k2.validator" in GRAPH["kimi_eagle_data.formats.kimi_k2.format"]   # a lazy import


def test_no_import_circle():
    found = circles(GRAPH)
    assert not found, "import circles: " + "; ".join(" -> ".join(c) for c in found)


# Packages whose modules stand for themselves in the package view: not a stage but one folder per chat format, each
# holding its profiles as plain data (declared to the registry, registry.py, which sits below the stages) and its format
# object (which renders with prompts/ and validates with validate/, above them). The module view still forbids any
# circle through them.
LAYERED_PACKAGES = (f"{PACKAGE}.formats",)


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph seen at the level of the package's subpackages (a top-level module, and a module of a
    LAYERED_PACKAGES package, stands for itself)."""
    def package(m: str) -> str:
        if any(_inside(m, p) for p in LAYERED_PACKAGES):
            return m
        return ".".join(m.split(".")[:2])
    folded: dict[str, set[str]] = {}
    for a, targets in graph.items():
        folded.setdefault(package(a), set()).update(package(b) for b in targets if package(b) != package(a))
    for targets in list(folded.values()):
        for b in targets:
            folded.setdefault(b, set())
    return folded


def test_no_circle_between_packages():
    """Stages import only downward: no two subpackages import each other, even through different modules."""
    found = circles(package_graph(GRAPH))
    assert not found, "package circles: " + "; ".join(" -> ".join(c) for c in found)


def test_nothing_imports_the_cli_from_below():
    found = upward_imports(GRAPH)
    assert not found, "modules outside kimi_eagle_data.cli import it: " + "; ".join(found)


STORE = f"{PACKAGE}.store"
# What the storage layer may build on: the shared ground, nothing of a stage.
STORE_GROUND = {f"{PACKAGE}.{m}" for m in ("records", "errors", "diskfull", "json_text", "run_checks")}


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_store_sits_below_every_stage():
    found = [f"{a} -> {b}" for a in sorted(GRAPH) if _inside(a, STORE)
             for b in sorted(GRAPH[a]) if not _inside(b, STORE) and b not in STORE_GROUND]
    assert not found, "the store imports above itself: " + "; ".join(found)


def test_engines_do_not_know_the_store():
    """The generate stage (generate/) stores what engines answer; the engines themselves never see a checkpoint."""
    found = [f"{a} -> {b}" for a in sorted(GRAPH) if _inside(a, f"{PACKAGE}.engines")
             for b in sorted(GRAPH[a]) if _inside(b, STORE)]
    assert not found, "engines import the store: " + "; ".join(found)
    assert f"{PACKAGE}.store.checkpoint" in GRAPH[f"{PACKAGE}.generate.records"]   # the walk sees the edge


def test_emit_does_not_know_score():
    """The card's score section is handed to emit (runs.emit_dataset); emit and the card never read score."""
    found = [f"{a} -> {b}" for a in sorted(GRAPH) if _inside(a, f"{PACKAGE}.emit") or _inside(a, f"{PACKAGE}.cards")
             for b in sorted(GRAPH[a]) if _inside(b, f"{PACKAGE}.score")]
    assert not found, "emit imports score: " + "; ".join(found)
    assert f"{PACKAGE}.score.report" in GRAPH[f"{PACKAGE}.runs"]   # the walk sees the edge


def test_reports_validate_cards_and_emit_know_no_engine():
    """They read what a run recorded (records.py: the drafter's counters, server_args), never the engines that
    made it: an engine's protocol can change without touching a report, the card or the emitted dataset."""
    readers = [f"{PACKAGE}.{p}" for p in ("reports", "validate", "cards", "emit")]
    found = [f"{a} -> {b}" for a in sorted(GRAPH) if any(_inside(a, r) for r in readers)
             for b in sorted(GRAPH[a]) if _inside(b, f"{PACKAGE}.engines")]
    assert not found, "readers of a run import engine code: " + "; ".join(found)
    assert f"{PACKAGE}.records" in GRAPH[f"{PACKAGE}.cards.card"]     # the walk sees the remapped cards/ folder


# Edges that ran upward and were cut: a format owns its inspect segmenter (formats/kimi_k2/segments.py), the completion
# grammar decodes with the shared decoder (decoding.py), the plan is handed the score report by the CLI.
CUT_EDGES = [(f"{PACKAGE}.formats.kimi_k2.format", f"{PACKAGE}.reports"), (f"{PACKAGE}.formats.kimi_k2.grammar", f"{PACKAGE}.prompts"),
             (f"{PACKAGE}.reports.plan", f"{PACKAGE}.score")]


def test_cut_edges_stay_cut():
    found = [f"{a} -> {b}" for a, package in CUT_EDGES for b in sorted(GRAPH[a]) if _inside(b, package)]
    assert not found, "edges cut on purpose are back: " + "; ".join(found)
    assert f"{PACKAGE}.formats.kimi_k2.segments" in GRAPH[f"{PACKAGE}.formats.kimi_k2.format"]   # the walk sees a lazy import
    assert f"{PACKAGE}.decoding" in GRAPH[f"{PACKAGE}.formats.kimi_k2.grammar"]


def _reached(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for b in graph[todo.pop()] - seen:
            seen.add(b)
            todo.append(b)
    return seen


REGISTRY = [f"{PACKAGE}.{m}" for m in ("registry", "profile", "formats")]


def test_the_registry_imports_no_format():
    """The registry (registry.py, and profile.py and formats/__init__ over it) sits below the stages (settings.py
    reads it) and below every format: a format folder declares its format and profiles and the registry finds the
    folder by its place in the package, so nothing it reaches is a format folder, a stage or the CLI."""
    ground = {f"{PACKAGE}.{m}" for m in ("model_profile", "chat_format", "errors")}
    for start in REGISTRY:
        reached = _reached(GRAPH, start)
        found = sorted(m for m in reached if m not in ground and m not in REGISTRY)
        assert not found, f"{start} reaches: " + ", ".join(found)
    folders = [m for m in GRAPH if m.count(".") == 2 and _inside(m, f"{PACKAGE}.formats")]
    assert f"{PACKAGE}.formats.kimi_k2" in folders       # the walk sees the folders,
    assert f"{PACKAGE}.registry" in GRAPH[f"{PACKAGE}.formats.kimi_k2"]     # which import the registry (downward)


def test_click_stays_in_the_cli():
    """Library code (settings.py, profile.py, …) declares options as plain data; only cli/ builds click options."""
    found = []
    for name, path in module_files(package_dirs(ROOT)).items():
        if _inside(name, f"{PACKAGE}.cli"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{name} -> {t}" for t in targets if t == "click" or t.startswith("click.")]
    assert not found, "click outside the CLI: " + "; ".join(found)


def test_the_run_context_imports_no_stage():
    """Every stage takes the run's context (run_context.py); the context knows none of them."""
    ground = STORE_GROUND | {f"{PACKAGE}.{m}" for m in ("settings", "profile", "model_profile", "progress", "run_checks",
                                                           "chat_format")}
    found = [b for b in sorted(GRAPH[f"{PACKAGE}.run_context"]) if not _inside(b, STORE) and b not in ground]
    assert not found, "run_context imports: " + ", ".join(found)


def test_executors_sit_above_the_stages():
    """An executor (executors/) runs the stage commands somewhere else; no stage, and nothing but the CLI, knows
    it exists."""
    executors = f"{PACKAGE}.executors"
    found = [f"{a} -> {b}" for a in sorted(GRAPH) if not _inside(a, executors) and not _inside(a, f"{PACKAGE}.cli")
             for b in sorted(GRAPH[a]) if _inside(b, executors)]
    assert not found, "modules below the executors import them: " + "; ".join(found)
    assert f"{executors}.slurm.jobs" in GRAPH[f"{PACKAGE}.cli.slurm"]   # the walk sees the edge


def test_executors_run_engines_through_the_cli_only():
    """A job script starts its engine with `kimi-data serve` and talks to it through `kimi-data generate`: the
    executors import no engine code (the launch lines and health routes are serve's and the clients' own)."""
    executors = f"{PACKAGE}.executors"
    found = [f"{a} -> {b}" for a in sorted(GRAPH) if _inside(a, executors)
             for b in sorted(GRAPH[a]) if _inside(b, f"{PACKAGE}.engines")]
    assert not found, "executors import engine code: " + "; ".join(found)


# -- the checker itself, on a package made for it ------------------------------------------------------

def _fake_package(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools]\npackage-dir = { "kimi_eagle_data" = "pkg" }\n')
    for rel, text in {"__init__.py": "", "cli/__init__.py": "", **files}.items():
        f = tmp_path / "pkg" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return tmp_path


def test_the_checker_names_a_circle_and_an_upward_import(tmp_path):
    root = _fake_package(tmp_path, {
        "a.py": "from kimi_eagle_data import b\n",
        "b.py": "def f():\n    from .c import g\n",                      # lazy and relative: still an edge
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import kimi_eagle_data.a\n",
        "d.py": "from kimi_eagle_data.cli.main import run\n",
        "cli/main.py": "from kimi_eagle_data import b\n",               # the CLI may import anything
        "e.py": "import kimi_eagle_data.b as b\nfrom kimi_eagle_data.cli import main\n",
    })
    graph = import_graph(root)
    assert graph["kimi_eagle_data.b"] == {"kimi_eagle_data.c"}
    found = circles(graph)
    assert found == [["kimi_eagle_data.a", "kimi_eagle_data.b", "kimi_eagle_data.c", "kimi_eagle_data.a"]]
    assert upward_imports(graph) == ["kimi_eagle_data.d -> kimi_eagle_data.cli.main",
                                     "kimi_eagle_data.e -> kimi_eagle_data.cli.main"]


def test_the_package_view_names_a_circle_no_module_makes():
    graph = {"kimi_eagle_data.a.x": {"kimi_eagle_data.b.y"}, "kimi_eagle_data.b.y": set(),
             "kimi_eagle_data.b.z": {"kimi_eagle_data.a.w"}, "kimi_eagle_data.a.w": set()}
    assert circles(graph) == []
    assert circles(package_graph(graph)) == [["kimi_eagle_data.a", "kimi_eagle_data.b", "kimi_eagle_data.a"]]


def test_the_checker_passes_a_package_without_circles(tmp_path):
    root = _fake_package(tmp_path, {"a.py": "import kimi_eagle_data.b\n", "b.py": "import json\n"})
    graph = import_graph(root)
    assert circles(graph) == [] and upward_imports(graph) == []


# -- lazy imports of the package's own modules -----------------------------------------------------------
# A function-local import of a third-party library (torch, transformers, datasets, scipy, ...) keeps the CLI quick to
# start. One of our own modules, imported inside a function, mostly hides a layering problem, so each one left says
# why it is lazy: a comment on its line, or on the line above it (or above the run of import lines it stands in),
# such as "# lazy: keeps pyarrow out of every CLI start" or the import circle it avoids.

LAZY_OWN_IMPORT_LIMIT = 100

def lazy_own_imports(path: Path) -> list[tuple[int, bool]]:
    """(line, has a why-comment) of each import of the package's own modules inside a function body of `path`
    (a relative import counts; an import in a nested function is counted once)."""
    import io
    import tokenize

    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, str(path))
    comment_lines, code_lines = set(), set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            comment_lines.add(tok.start[0])
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            code_lines.add(tok.start[0])
    import_lines = {n for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                    for n in range(node.lineno, node.end_lineno + 1)}

    def own(node: ast.AST) -> bool:
        if isinstance(node, ast.ImportFrom):
            return node.level > 0 or node.module == PACKAGE or (node.module or "").startswith(PACKAGE + ".")
        return isinstance(node, ast.Import) and any(a.name == PACKAGE or a.name.startswith(PACKAGE + ".")
                                                    for a in node.names)

    def explained(node: ast.AST) -> bool:
        if comment_lines & set(range(node.lineno, node.end_lineno + 1)):
            return True
        line = node.lineno - 1
        while line in import_lines and line not in comment_lines:    # up through the run of imports it stands in
            line -= 1
        return line in comment_lines and line not in code_lines      # a comment line of its own

    found: dict[int, ast.AST] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.update({id(n): n for n in ast.walk(fn) if own(n)})
    return sorted((n.lineno, explained(n)) for n in found.values())


def all_lazy_own_imports(root: Path = ROOT) -> dict[str, list[tuple[int, bool]]]:
    """Every file of the package (the folders pyproject.toml maps included), by path relative to `root`."""
    files = {f for folder in package_dirs(root).values() for f in folder.rglob("*.py")}
    found = {f.relative_to(root).as_posix(): lazy_own_imports(f) for f in sorted(files)}
    return {rel: lines for rel, lines in found.items() if lines}


LAZY = all_lazy_own_imports()


def test_lazy_imports_of_our_own_modules_stay_few():
    total = sum(len(lines) for lines in LAZY.values())
    by_file = sorted(((len(lines), rel) for rel, lines in LAZY.items()), reverse=True)
    assert total <= LAZY_OWN_IMPORT_LIMIT, (
        f"{total} function-local imports of kimi_eagle_data modules (limit {LAZY_OWN_IMPORT_LIMIT}); import at the "
        "top, or move what is imported where it belongs. Most: " + ", ".join(f"{rel} {n}" for n, rel in by_file[:8]))
    assert total > 0 and "kimi_eagle_data/cli/main.py" in LAZY    # the walk sees them


def test_each_lazy_import_of_our_own_modules_says_why():
    found = [f"{rel}:{line}" for rel, lines in LAZY.items() for line, explained in lines if not explained]
    assert not found, ("function-local imports of kimi_eagle_data modules without a comment saying why they are lazy "
                       "(on the line or the line above; or import them at the top): " + ", ".join(found))


def test_the_lazy_import_walk_on_a_file_made_for_it(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(
        "import json\n"
        "from kimi_eagle_data import errors\n"                   # 2: at the top, not lazy
        "def a():\n"
        "    from kimi_eagle_data.x import y\n"                  # 4: no comment
        "    # lazy: keeps torch out of the CLI start\n"
        "    from kimi_eagle_data.z import w\n"                  # 6: the comment above
        "    from .sibling import v\n"                           # 7: relative, in the commented run
        "    import os\n"
        "    def inner():\n"
        "        import kimi_eagle_data.q as q  # lazy: circle q -> m\n"   # 10: same line; nested, counted once
        "    x = 1  # not a comment of its own\n"
        "    from kimi_eagle_data.r import s\n"                  # 12: the line above has code
        "    from rich.table import Table\n"                     # not ours
        "class C:\n"
        "    def m(self):\n"
        "        from kimi_eagle_data.t import (\n"
        "            u)  # lazy: a comment on its last line\n"   # 16
        "    from kimi_eagle_data.k import j\n")                  # class body, not a function: not counted
    assert lazy_own_imports(f) == [(4, False), (6, True), (7, True), (10, True), (12, False), (16, True)]
