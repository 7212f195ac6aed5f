"""The package stays under its line budget (tests/line_budget.py, where the budget is raised or lowered)."""

from __future__ import annotations

from tests.line_budget import BUDGET, by_folder, code_lines, summary


def test_code_lines_counts_statements_however_wrapped():
    source = '"""A docstring\non two lines."""\n\n# a comment\nx = 1  # trailing\n\n    \ny = (\n    2)\n'
    assert code_lines(source) == 3
    assert code_lines("y = (\n    2)\n") == code_lines("y = (2)\n") == 1


def test_the_package_is_within_its_line_budget():
    counts = by_folder()
    assert {"board", "tflite", "."} <= counts.keys()
    total = sum(counts.values())
    assert total <= BUDGET, (
        f"{summary(counts)}\nedgekit grew past its line budget by {total - BUDGET:,} lines: "
        "make it smaller, or raise BUDGET in tests/line_budget.py saying why"
    )


def test_by_folder_counts_a_package_of_two_folders(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "m.py").write_text("x = 1\n\n# note\n")
    (tmp_path / "top.py").write_text("def f():\n    return 2\n")  # the def line and the return
    assert by_folder(tmp_path) == {".": 2, "a": 1}
