"""The docs the README links to: option tables generated from the click definitions, never hand-copied."""

from __future__ import annotations

from edgekit.cli import docs as cli_docs
from edgekit.cli.app import cli


def test_every_command_has_a_page_whose_option_table_matches_the_cli():
    assert cli_docs.main(["--check"]) == 0, "run: python -m edgekit.cli.docs"
    for name, command in cli.commands.items():
        page = (cli_docs.DOCS / f"{name}.md").read_text(encoding="utf-8")
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-") and not getattr(param, "hidden", False):
                    assert f"`{opt}`" in page, (name, opt)


def test_a_changed_option_makes_the_check_fail(tmp_path, monkeypatch):
    import shutil

    shutil.copytree(cli_docs.DOCS, tmp_path / "commands")
    monkeypatch.setattr(cli_docs, "DOCS", tmp_path / "commands")
    page = tmp_path / "commands" / "inspect.md"
    page.write_text(page.read_text().replace("Print one JSON document", "Print a JSON document"))
    assert cli_docs.main(["--check"]) == 1
    assert cli_docs.main([]) == 0 and cli_docs.main(["--check"]) == 0  # regenerated, prose kept
    assert page.read_text().startswith("# `edgekit inspect")  # the prose above the table is kept


def test_the_compatibility_page_is_the_rule_table():
    from edgekit.edgetpu.compatibility import RULES

    page = cli_docs.RULES_PAGE.read_text(encoding="utf-8")
    assert page == cli_docs.rules_page(), "run: python -m edgekit.cli.docs"
    assert all(f"| `{op}` |" in page for op in RULES) and f"{len(RULES)} ops" in page
