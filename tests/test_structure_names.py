"""The package's shape where a reader meets it (issue 33, item 6): no module reaches another one's underscore
names, and an exception is built with what it carries, not changed on its way up. Read with ``ast`` (the walk of
tests/test_structure.py), nothing is imported."""

from __future__ import annotations

import ast
import sys

from tests import test_structure
from tests.test_structure import MODULES, _internal, _targets


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def cross_module_private_names() -> list[str]:
    """Where a module reaches another edgekit module's underscore name: ``from edgekit.x import _y``, or ``x._y``
    on a name bound to an edgekit module (``from edgekit import x``, ``import edgekit.x as x``). One entry per
    importer and name: ``importer -> module._name``."""
    found = set()
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        modules_bound: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _targets(
                    module,
                    ast.ImportFrom(module=node.module, names=[ast.alias(name="_")], level=node.level),
                    path.name == "__init__.py",
                )[0]
                for alias in node.names:
                    if f"{base}.{alias.name}" in MODULES:
                        modules_bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                    elif _private(alias.name) and _internal(base) not in (None, module):
                        found.add(f"{module} -> {base}.{alias.name}")
            elif isinstance(node, ast.Import):
                modules_bound.update({a.asname: a.name for a in node.names if a.asname and a.name in MODULES})
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and _private(node.attr)
                and isinstance(node.value, ast.Name)
                and modules_bound.get(node.value.id, module) != module
            ):
                found.add(f"{module} -> {modules_bound[node.value.id]}.{node.attr}")
    return sorted(found)


# Underscore names another module may still reach, each with its reason (issue 33: there were 29 such pairs, in
# 19 import statements and 3 attribute uses; the shared ones were made public).
KNOWN_PRIVATE_REACHES: dict[str, str] = {}


def test_the_walk_finds_an_underscore_name_reached_from_another_module(tmp_path, monkeypatch):
    """The checker itself, on two made-up modules: an import of ``_y`` and a ``mod._z`` are found, a module's own
    ``self._x`` and a public name are not."""
    (tmp_path / "edgekit").mkdir()
    (tmp_path / "edgekit" / "a.py").write_text("_y = 1\n_z = 2\nw = 3\n")
    (tmp_path / "edgekit" / "b.py").write_text(
        "from edgekit.a import _y, w\nfrom edgekit import a\n"
        "print(a._z, a.w, _y)\n\nclass B:\n    def f(self):\n"
        "        return self._x\n"
    )
    made_up = {"edgekit.a": tmp_path / "edgekit" / "a.py", "edgekit.b": tmp_path / "edgekit" / "b.py"}
    for module in (sys.modules[__name__], test_structure):  # the walk's own table and the one it resolves with
        monkeypatch.setattr(module, "MODULES", made_up)
    assert cross_module_private_names() == ["edgekit.b -> edgekit.a._y", "edgekit.b -> edgekit.a._z"]


def test_no_module_reaches_another_ones_underscore_names():
    """A name shared between modules is public (no underscore): a new reach fails here, with where it is."""
    found = cross_module_private_names()
    new = [reach for reach in found if reach not in KNOWN_PRIVATE_REACHES]
    assert new == [], "make the name public where it is shared, or move it:\n" + "\n".join(new)
    gone = sorted(set(KNOWN_PRIVATE_REACHES) - set(found))
    assert gone == [], "no longer reached: take them out of KNOWN_PRIVATE_REACHES\n" + "\n".join(gone)


def _error_names(function: ast.AST) -> set[str]:
    """The names a function binds to an exception: ``except ... as name``, ``name = SomeError(...)`` /
    ``name = ...error(...)`` / ``name = ..._failure(...)`` (a function that makes one; ``... if ... else ...`` too),
    and parameters named ``exc``, ``err``, ``error`` or ``failure``."""
    names = {
        a.arg for a in function.args.args + function.args.kwonlyargs if a.arg in ("exc", "err", "error", "failure")
    }
    for node in ast.walk(function):
        value = getattr(node, "value", None)
        value = value.body if isinstance(value, ast.IfExp) else value
        if isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Assign) and isinstance(value, ast.Call):
            func = value.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called.endswith(("Error", "_error", "_failure", "Refused")):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def errors_changed_after_construction() -> list[str]:
    """``module.function: name.attribute`` for each attribute set on an exception after it was made (an error is
    built with what it carries, issue 33), ``self.x = ...`` in an exception's own ``__init__`` aside."""
    found = set()
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            names = _error_names(function)
            for node in ast.walk(function):
                targets = (
                    node.targets
                    if isinstance(node, ast.Assign)
                    else [node.target]
                    if isinstance(node, (ast.AugAssign, ast.AnnAssign))
                    else []
                )
                flat = [x for target in targets for x in (target.elts if isinstance(target, ast.Tuple) else [target])]
                for t in flat:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in names:
                        found.add(f"{module}.{function.name}: {t.value.id}.{t.attr}")
    return sorted(found)


# Exceptions still changed on their way up, each with its reason.
KNOWN_CHANGED_ERRORS: dict[str, str] = {
    "edgekit.api._at: err.message": "the frame of a batch prefixed to whatever error the one-image call raised "
    "(any EdgekitError subclass: no one constructor to build it again with)",
    "edgekit.api._at: err.args": "the same prefix, in the text str() and tracebacks show",
}


def test_the_walk_finds_an_error_changed_after_it_was_made(tmp_path, monkeypatch):
    """The checker itself, on a made-up module: a caught error, one a function made and a parameter named like one
    changed are found; an exception's own ``self.x`` in its ``__init__`` and a plain object are not."""
    (tmp_path / "c.py").write_text(
        "def f():\n    try:\n        g()\n    except E as err:\n        err.result = 1\n        raise\n"
        "def h(exc):\n    failure = x.strict_error() if s else None\n    failure.result, y = 2, 3\n"
        "    exc.value = 4\n    raise failure\n"
        "class Boom(Exception):\n    def __init__(self, m):\n        self.m = m\n"
        "def k():\n    thing = make()\n    thing.x = 1\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "MODULES", {"edgekit.c": tmp_path / "c.py"})
    assert errors_changed_after_construction() == [
        "edgekit.c.f: err.result",
        "edgekit.c.h: exc.value",
        "edgekit.c.h: failure.result",
    ]


def test_errors_are_built_with_what_they_carry_not_changed_on_the_way_up():
    found = errors_changed_after_construction()
    new = [where for where in found if where not in KNOWN_CHANGED_ERRORS]
    assert new == [], "pass the value to the error's constructor instead:\n" + "\n".join(new)
    gone = sorted(set(KNOWN_CHANGED_ERRORS) - set(found))
    assert gone == [], "no longer changed: take them out of KNOWN_CHANGED_ERRORS\n" + "\n".join(gone)
