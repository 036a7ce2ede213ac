"""The project's parts import one way (src/exactly_once/__init__.py, `LAYERS`), and so do the
runtime's wings (src/exactly_once/local/__init__.py, `WINGS`): a part imports only the parts
below it, and no module imports itself back through another."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from exactly_once import LAYERS
from exactly_once.local import WINGS

SRC = Path(__file__).resolve().parents[1] / "src" / "exactly_once"
LOCAL = SRC / "local"
TOP, PACKAGE = "exactly_once", "exactly_once.local"


def module_name(path: Path, root: Path = LOCAL, package: str = PACKAGE) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((package, *parts))


def imported_modules(path: Path, root: Path = LOCAL, package: str = PACKAGE) -> set[str]:
    """Every module of `package` that `path` imports, at the top or inside a function.
    `from a.b import c` imports module `a.b.c` when there is one, else (a name in it) `a.b`."""
    known = {module_name(p, root, package) for p in root.rglob("*.py")}
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in known else node.module)
    return {name for name in found if name in known and name != package}


def wing_of(module: str, package: str = PACKAGE) -> str:
    return module.removeprefix(package + ".").split(".")[0]


def layering_violations(root: Path = LOCAL) -> list[str]:
    problems = []
    for path in sorted(root.rglob("*.py")):
        if path.parent == root:
            continue
        here = module_name(path, root)
        for target in sorted(imported_modules(path, root)):
            if WINGS.index(wing_of(target)) < WINGS.index(wing_of(here)):
                problems.append(f"{here} imports {target}: {wing_of(here)} is below "
                                f"{wing_of(target)}")
    return problems


def layer_of(part: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if part in layer)


def part_violations(root: Path = SRC) -> list[str]:
    """Imports of a part on the same line of `LAYERS` or above, across the whole package."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        if path == root / "__init__.py":
            continue
        here = module_name(path, root, TOP)
        for target in sorted(imported_modules(path, root, TOP)):
            mine, theirs = wing_of(here, TOP), wing_of(target, TOP)
            if mine != theirs and layer_of(theirs) <= layer_of(mine):
                problems.append(f"{here} imports {target}: {mine} is not above {theirs}")
    return problems


def import_cycles(root: Path = LOCAL, package: str = PACKAGE) -> list[list[str]]:
    """Each cycle of module imports, found by a depth-first walk, as the path that closes it."""
    graph = {module_name(p, root, package): imported_modules(p, root, package)
             for p in root.rglob("*.py")}
    cycles: list[list[str]] = []
    finished: set[str] = set()

    def visit(path: list[str]) -> None:
        for target in sorted(graph[path[-1]]):
            if target in path:
                cycles.append(path[path.index(target):] + [target])
            elif target not in finished:
                visit([*path, target])
        finished.add(path[-1])

    for module in sorted(graph):
        if module not in finished:
            visit([module])
    return cycles


def test_every_part_of_the_package_has_its_layer():
    parts = {p.stem for p in SRC.iterdir()
             if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()}
    assert parts == {part for layer in LAYERS for part in layer}


def test_parts_import_only_the_parts_below_them():
    assert part_violations() == []


def test_no_module_of_the_package_imports_itself_back():
    assert import_cycles(SRC, TOP) == []


def test_the_check_catches_settings_importing_kafka(tmp_path):
    """The package-wide checks can fail: settings/ importing kafka/ (the arrow `--source`
    resolution drew before it moved to the CLI), and a cycle through the two."""
    copy = tmp_path / "exactly_once"
    shutil.copytree(SRC, copy)
    pipeline = copy / "settings" / "pipeline.py"
    pipeline.write_text(pipeline.read_text()
                        + "\nfrom exactly_once.kafka.kcat import kcat_dump_files\n")
    assert part_violations(copy) == [
        "exactly_once.settings.pipeline imports exactly_once.kafka.kcat: "
        "settings is not above kafka"]
    kcat = copy / "kafka" / "kcat.py"
    kcat.write_text(kcat.read_text() + "\nfrom exactly_once.settings import pipeline\n")
    assert ["exactly_once.kafka.kcat", "exactly_once.settings.pipeline",
            "exactly_once.kafka.kcat"] in import_cycles(copy, TOP)


def test_every_module_lives_in_a_wing():
    loose = [p.name for p in LOCAL.glob("*.py") if p.name != "__init__.py"]
    assert loose == []
    assert sorted(p.name for p in LOCAL.iterdir() if (p / "__init__.py").is_file()) \
        == sorted(WINGS)


def test_wings_import_only_the_wings_below_them():
    assert layering_violations() == []


def test_no_module_imports_itself_back():
    assert import_cycles() == []


def tree_with_import(tmp_path: Path, module: str, statement: str) -> Path:
    copy = tmp_path / "local"
    shutil.copytree(LOCAL, copy)
    (copy / module).write_text((copy / module).read_text() + f"\n{statement}\n")
    return copy


def test_the_check_catches_a_storage_module_importing_execution(tmp_path):
    """The checks above can fail: a copy of the tree where storage imports execution."""
    copy = tree_with_import(tmp_path, "storage/lock.py",
                            "from exactly_once.local.execution.update import PipelineUpdate")
    assert layering_violations(copy) == [
        "exactly_once.local.storage.lock imports exactly_once.local.execution.update: "
        "storage is below execution"]


def test_the_check_catches_an_update_importing_the_warehouse_readers(tmp_path):
    """inspect/ reads what an update wrote; an update that imports it fails the check."""
    copy = tree_with_import(tmp_path, "execution/update.py",
                            "from exactly_once.local.inspect.explain import explain_key")
    assert layering_violations(copy) == [
        "exactly_once.local.execution.update imports exactly_once.local.inspect.explain: "
        "execution is below inspect"]


def test_the_check_catches_a_cycle_inside_a_wing(tmp_path):
    copy = tree_with_import(tmp_path, "engine/jvm_options.py",
                            "from exactly_once.local.engine import session")
    assert import_cycles(copy) == [["exactly_once.local.engine.jvm_options",
                                    "exactly_once.local.engine.session",
                                    "exactly_once.local.engine.jvm_options"]]


def test_the_check_catches_auto_loader_importing_graph(tmp_path):
    """auto_loader sits below graph (which builds queries with it) and above storage."""
    copy = tree_with_import(tmp_path, "auto_loader/options.py",
                            "from exactly_once.local.graph import reads")
    assert layering_violations(copy) == [
        "exactly_once.local.auto_loader.options imports exactly_once.local.graph.reads: "
        "auto_loader is below graph"]
