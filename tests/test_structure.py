"""The package's import structure: no circles, nothing below reaching up, devices/ never reaching converters/.

Every ``import`` statement counts, function-local ones too (a lazy import still ties two modules
together: it only moves the failure to run time). Read with ``ast``, nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "edgekit"


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _targets(module: str, node: ast.Import | ast.ImportFrom, is_package: bool) -> list[str]:
    """The dotted names an import statement reaches (``from a import b``: ``a.b`` when it is a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([base] if base else []))
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of import nodes under ``if TYPE_CHECKING:``: read by type checkers only, never run."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skipped


def imports(module: str) -> dict[str, int]:
    """Everything ``module`` imports anywhere in its file (top level, functions, branches; not what only
    ``if TYPE_CHECKING:`` imports): name -> line."""
    path = MODULES[module]
    found: dict[str, int] = {}
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skipped = _type_checking_only(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skipped:
            for name in _targets(module, node, path.name == "__init__.py"):
                found.setdefault(name, node.lineno)
    return found


def _internal(name: str) -> str | None:
    """The edgekit module a dotted name lives in (``edgekit.a.b.func`` -> ``edgekit.a.b``), or None."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def graph() -> dict[str, dict[str, int]]:
    """Module -> the edgekit modules it imports (-> line). A package's own ``__init__`` is not an edge."""
    edges: dict[str, dict[str, int]] = {}
    for module in MODULES:
        edges[module] = {}
        for name, line in imports(module).items():
            target = _internal(name)
            if target and target != module and not module.startswith(target + "."):
                edges[module].setdefault(target, line)
    return edges


def circles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in edges:
        if module not in index:
            visit(module)
    return found


def _describe(component: list[str], edges: dict[str, dict[str, int]]) -> str:
    return "; ".join(
        f"{MODULES[a].relative_to(PACKAGE.parent)}:{line} imports {b}"
        for a in component
        for b, line in sorted(edges[a].items())
        if b in component
    )


def test_the_walk_sees_lazy_imports_and_finds_a_circle():
    """The checker itself: a function-local import counts, and a two-module circle is reported."""
    edges = {"a": {"b": 3}, "b": {"a": 9}, "c": {"a": 1}}
    assert circles(edges) == [["a", "b"]]
    assert "edgekit.board.backends" in graph()["edgekit.board.classifier"]  # imported inside a function
    assert "edgekit.results" in graph()["edgekit.api"]


# Circles known and not yet broken (the test fails when one grows, shrinks or goes: then update or drop the
# entry). None: the check engine's tables no longer look each other up (catalogue.all_rules lists them all,
# and COMMON's constraints read the op's rule from the OpContext).
KNOWN_CIRCLES: list[list[str]] = []


def test_no_import_circle_in_the_package():
    edges = graph()
    found = circles(edges)
    new = [c for c in found if c not in KNOWN_CIRCLES]
    assert new == [], "\n".join(_describe(c, edges) for c in new)
    assert sorted(found) == sorted(KNOWN_CIRCLES), "a known circle is gone or changed: update KNOWN_CIRCLES"


def test_devices_never_import_converters_training_or_tensorflow():
    """The runtime half stays light (backends' last-resort ``tensorflow.lite`` goes through importlib)."""
    bad = []
    for module in MODULES:
        if not module.startswith("edgekit.devices"):
            continue
        for name, line in imports(module).items():
            top = name.split(".")[0]
            if top in ("tensorflow", "tf_keras", "keras", "onnx", "onnxruntime") or name.startswith(
                ("edgekit.converters", "edgekit.training")
            ):
                bad.append(f"{MODULES[module].relative_to(PACKAGE.parent)}:{line} imports {name}")
    assert bad == []


def test_modules_beside_the_halves_do_not_reach_into_devices_or_converters():
    """Shared modules (the reader, preprocessing, records, manifest...) sit below both halves."""
    shared = (
        "edgekit.tflite.model",
        "edgekit.tflite.edgetpu_package",
        "edgekit.board.flatbuffer",
        "edgekit.board.preprocess",
        "edgekit.board.classes",
        "edgekit.tflite.model_record",
        "edgekit.board.manifest",
        "edgekit.errors",
        "edgekit.results.metrics",
        "edgekit.report",
        "edgekit.fileio",
        "edgekit.data.labelled",
        "edgekit.tflite.schema_names",
    )
    bad = [
        f"{MODULES[m].relative_to(PACKAGE.parent)}:{line} imports {target}"
        for m in shared
        if m in MODULES
        for target, line in graph()[m].items()
        if target.startswith(("edgekit.devices", "edgekit.converters", "edgekit.training", "edgekit.cli.commands"))
    ]
    assert bad == []


def test_the_cpu_twin_rule_of_records_and_of_the_runtime_agree():
    """model_record (below devices/) keeps its own copy of the ``x_edgetpu.tflite`` -> ``x.tflite`` rule."""
    from edgekit.board.backends import cpu_twin
    from edgekit.tflite.model_record import cpu_model_path

    for name in (
        "m_edgetpu.tflite",
        "m.tflite",
        "dir/a_b_edgetpu.tflite",
        "_edgetpu.tflite",
        "m_edgetpu",
        "m_edgetpu.tflite.bak",
        "m_EDGETPU.tflite",
    ):
        assert cpu_model_path(name) == cpu_twin(name), name


def test_the_board_runners_package_finders_are_twins_of_the_runtime_cores():
    """board_runner's probe runs alone on a board, before the core is there: its copies must stay equal."""
    import inspect

    from edgekit.board import backends
    from edgekit.board import runner as board_runner

    for name in ("module_available", "google_pycoral_available"):
        assert inspect.getsource(getattr(board_runner, name)) == inspect.getsource(getattr(backends, name)), name


def test_the_manifests_words_of_the_result_layer_and_of_the_board_agree():
    """results/build.py (which may not import board/) keeps its own copy of manifest.json's format words and clock."""
    import inspect

    from edgekit.board import manifest
    from edgekit.results import build

    assert (build.FORMAT, build.FORMAT_VERSION) == (manifest.FORMAT, manifest.FORMAT_VERSION)
    assert inspect.getsource(build.utc_now) == inspect.getsource(manifest.utc_now)
    entry = build.BundleFile("m.tflite", "ab" * 32, 7)
    assert manifest.FileEntry.from_dict(entry.to_dict()).to_dict() == entry.to_dict()


# Issue 25: quantize, calibration loading and train are named stages, not one long function each.
LONGEST_FUNCTION = 60  # lines from ``def`` to the last line, docstring included


def test_no_function_in_converters_or_training_is_over_sixty_lines():
    too_long = []
    for module, path in MODULES.items():
        if not module.startswith(("edgekit.converters", "edgekit.training")):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > LONGEST_FUNCTION:
                    too_long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}: {lines} lines")
    assert too_long == []


def test_documents_are_typed_not_string_keyed_dicts():
    """edgekit's own documents are typed records; ``dict[str, Any]`` is left only where raw JSON is just read
    (a board's answer, a manifest or a record on disk, the COCO file a user gives) and in the records' own
    ``to_dict``. A ratchet: lower the bound when one goes, never raise it without a raw-JSON reason."""
    import re

    found = [
        f"{path.relative_to(PACKAGE.parent)}:{i}"
        for path in MODULES.values()
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\b[dD]ict\[str, Any\]", line)
    ]
    # 12: detection/layout.py's _recorded_layout takes the layout recorded in a model file, raw JSON until
    # _record_misfit checks it (it was mis-annotated LayoutDoc before); 14: detect's Object and ImageObjects write
    # their own to_dict (the document's key order, each box normalized to its image), as classify's ImageClasses
    assert len(found) <= 14, "\n".join(found)


# The floors of the house, bottom first (docs/development.md draws them). A module may import its own floor and
# those below; each floor is a folder, but for the foundations at the package's root.
FLOORS = (
    (
        "foundations",
        (
            "edgekit",
            "edgekit.errors",
            "edgekit.fileio",
            "edgekit.report",
            "edgekit.flags",
            "edgekit.records",
            "edgekit.ssh",
        ),
    ),
    ("results", ("edgekit.results",)),  # the typed documents (the board's runtime core returns some)
    ("board", ("edgekit.board",)),  # ships to a Python 3.7 board
    ("data", ("edgekit.data",)),
    ("tflite", ("edgekit.tflite",)),
    ("edgetpu", ("edgekit.edgetpu",)),
    ("detection", ("edgekit.detection",)),
    ("devices", ("edgekit.devices",)),
    ("converters", ("edgekit.converters", "edgekit.training")),
    ("doctor", ("edgekit.doctor",)),
    ("pipeline", ("edgekit.pipeline",)),
    ("api", ("edgekit.api",)),
    ("cli", ("edgekit.cli", "edgekit.__main__")),
)
# Imports that still run up a floor, each to be removed (issue 33, item 3 removed the last ones: the result layer at
# the bottom). Empty; the machinery stays for the next one found.
KNOWN_UPWARD: set[tuple[str, str]] = set()


def floor(module: str) -> int:
    for i, (_, prefixes) in enumerate(FLOORS):
        if any(module == p or (p != "edgekit" and module.startswith(p + ".")) for p in prefixes):
            return i
    raise AssertionError(f"{module} is on no floor: add it to FLOORS (and to docs/development.md's picture)")


def upward_imports() -> dict[tuple[str, str], str]:
    edges = graph()
    return {
        (a, b): f"{MODULES[a].relative_to(PACKAGE.parent)}:{line} imports {b}"
        for a in edges
        for b, line in edges[a].items()
        if floor(b) > floor(a)
    }


def test_every_module_is_on_a_floor_and_no_import_runs_up_one():
    up = upward_imports()
    new = sorted(where for pair, where in up.items() if pair not in KNOWN_UPWARD)
    assert new == [], "\n".join(new)
    gone = sorted(f"{a} -> {b}" for a, b in KNOWN_UPWARD - set(up))
    assert gone == [], "no longer imported: take them out of KNOWN_UPWARD\n" + "\n".join(gone)


# What ships beside edgekit/board/: the foundations the board stands on, named here once.
SHIPPED_FOUNDATIONS = {"edgekit/__init__.py", "edgekit/errors.py", "edgekit/records.py"}


def test_the_board_folder_is_exactly_what_ships():
    """What deploy copies to a board is edgekit/board/ whole, the named foundations, and exactly the result modules
    (with results/__init__.py) that board/ imports, directly or through another of them: the records its runtime
    core returns. Nothing else of the host's goes to the board."""
    from edgekit.board.runner import SHIPPED_MODULES

    folder = {str(p.relative_to(PACKAGE.parent)) for p in (PACKAGE / "board").glob("*.py")}
    edges = graph()
    reached, todo = set(), [m for m in edges if m.startswith("edgekit.board")]
    while todo:
        for b in edges.get(todo.pop(), {}):
            if b.startswith("edgekit.results.") and b not in reached:
                reached.add(b)
                todo.append(b)
    results = {str(MODULES[m].relative_to(PACKAGE.parent)) for m in reached}
    results |= {"edgekit/results/__init__.py"} if results else set()
    assert set(SHIPPED_MODULES) == folder | SHIPPED_FOUNDATIONS | results
    assert not [p for p in (PACKAGE / "board").iterdir() if p.is_dir() and p.name != "__pycache__"]


def test_the_picture_in_development_md_names_every_folder_and_floor():
    """docs/development.md's house drawing is kept with the code: a folder it does not name fails here."""
    text = (PACKAGE.parent / "docs" / "development.md").read_text(encoding="utf-8")
    picture = text[text.index("## The house") : text.index("**Where does X live.**")]
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    assert [f for f in folders if f"{f}/" not in picture] == []
    assert [name for name, _ in FLOORS if name not in picture and f"{name}/" not in picture] == []


# Issue 33, item 3: the result layer at the bottom. The documents (records.py and results/) import only each other
# and the foundations: not the engine, the runtime, the TFLite reader, nor board/ (which ships to a Python 3.7
# board without them). The words they share with the engine (verdicts, targets, advice) live in results/.
RESULT_LAYER_MAY_IMPORT = ("edgekit.errors", "edgekit.fileio", "edgekit.report", "edgekit.flags", "edgekit.records")


def result_layer_imports(edges: dict[str, dict[str, int]]) -> list[str]:
    """Where a module of records.py or results/ imports an edgekit module outside them and the foundations."""
    return sorted(
        f"{a}:{line} imports {b}"
        for a in edges
        if a == "edgekit.records" or a.startswith("edgekit.results.")
        for b, line in edges[a].items()
        if b not in RESULT_LAYER_MAY_IMPORT and not b.startswith("edgekit.results.")
    )


def test_the_checker_of_the_result_layer_sees_a_reach_into_board():
    edges = {
        "edgekit.results.x": {"edgekit.board.manifest": 4, "edgekit.results.y": 5, "edgekit.errors": 6},
        "edgekit.records": {"edgekit.errors": 1},
        "edgekit.board.manifest": {"edgekit.results.x": 2},
    }
    assert result_layer_imports(edges) == ["edgekit.results.x:4 imports edgekit.board.manifest"]


def test_records_and_results_import_only_records_results_and_the_foundations():
    assert result_layer_imports(graph()) == []


# Issue 33, item 6: one name per class. Two classes of one name in two modules (two CheckSummary, two QuantizeResult
# were) make a reader ask which is meant, and an import of the wrong one type-checks by its name alone.
def duplicate_class_names(modules: dict[str, Path]) -> dict[str, list[str]]:
    """Class name -> the modules defining it, for each name defined in more than one module (private names too)."""
    where: dict[str, list[str]] = {}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ClassDef) and module not in where.setdefault(node.name, []):
                where[node.name].append(module)
    return {name: found for name, found in sorted(where.items()) if len(found) > 1}


def test_the_duplicate_class_finder_sees_a_twin(tmp_path):
    (tmp_path / "a.py").write_text("class Result:\n    pass\n\n\nclass Only:\n    pass\n")
    (tmp_path / "b.py").write_text("def f():\n    class Result:\n        pass\n")
    found = duplicate_class_names({"a": tmp_path / "a.py", "b": tmp_path / "b.py"})
    assert found == {"Result": ["a", "b"]}


def test_each_class_name_is_defined_once_in_the_package():
    assert duplicate_class_names(MODULES) == {}
