"""The counts docs/development.md keeps of the house (issue 33): run on a checkout, print one line each.

    python tools/house_counts.py [CHECKOUT]

- modules at the package root (and their lines), and lines of code in edgekit/ (not blank, not comment-only);
- record types: classes deriving from records' ``Record`` (directly or through another record), wherever defined;
- TypedDicts, and adapters: functions or methods named ``of_*`` / ``from_*_document`` / ``to_typed*`` that turn one
  type of a document into another;
- class names defined in more than one module;
- command-line flags declared more than once in flags.py (``option(...)`` calls naming the same long flag), and of
  those, how many carry the same meaning (two declarations with the same Python name, value type, default and start of help).
Duplicate pairs of six or more lines are counted with a six-line duplicate finder (not part of this script).
Reads the files with ``ast``; imports nothing of edgekit.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ADAPTER_PREFIXES = ("of_", "to_typed", "from_document", "from_report", "as_record", "from_typed")


def code_lines(path: Path) -> int:
    return sum(
        1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip() and not line.strip().startswith("#")
    )


def main(root: Path) -> None:
    package = root / "edgekit"
    files = sorted(package.rglob("*.py"))
    trees = {f: ast.parse(f.read_text(encoding="utf-8")) for f in files}
    root_modules = [f for f in files if f.parent == package and f.name not in ("__init__.py", "__main__.py")]
    total = sum(code_lines(f) for f in files)
    at_root = sum(code_lines(f) for f in root_modules)
    classes: dict[str, list[str]] = defaultdict(list)
    bases: dict[str, set[str]] = {}
    typed_dicts = adapters = 0
    for f, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes[node.name].append(str(f.relative_to(root)))
                names = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
                bases.setdefault(node.name, set()).update(names)
                typed_dicts += "TypedDict" in names
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(ADAPTER_PREFIXES):
                adapters += 1
    records = {"Record"}
    grew = True
    while grew:
        new = {c for c, b in bases.items() if b & records} - records
        records |= new
        grew = bool(new)
    twice = sorted(name for name, where in classes.items() if len(set(where)) > 1)
    flags_twice, same_meaning = flag_counts(package / "flags.py")
    print(
        f"modules at the package root: {len(root_modules)} ({at_root} lines of {total}, {100 * at_root / total:.0f}%)"
    )
    print(f"lines of code in edgekit/: {total} in {len(files)} files")
    print(f"record types: {len(records) - 1}")
    print(f"TypedDicts: {typed_dicts}; adapters between types of one document: {adapters}")
    print(f"class names defined in more than one module: {len(twice)} {' '.join(twice)}")
    print(f"flags declared more than once: {flags_twice}, {same_meaning} of them with the same meaning")


def flag_counts(flags_py: Path) -> tuple[int, int]:
    decls: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for node in ast.walk(ast.parse(flags_py.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "option":
            strings = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            long_flags = [s for s in strings if s.startswith("--")] or strings[:1]
            kw = {k.arg: ast.unparse(k.value) for k in node.keywords}
            if long_flags:
                decls[long_flags[0]].append(
                    (kw.get("name", ""), kw.get("type", ""), kw.get("default", ""), kw.get("help", "")[:40])
                )
    twice = {flag: d for flag, d in decls.items() if len(d) > 1}
    same = sum(1 for d in twice.values() if len(set(d)) < len(d))
    return len(twice), same


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]))
