"""The ``edgekit`` command line: the click group (``app``), the fast path (``base``), the commands (``commands``)
and the generated docs tables (``docs``). Options are declared once, in :mod:`edgekit.flags`."""


def main(argv=None):
    """The ``edgekit`` console script (``edgekit.cli:main``): runs :func:`edgekit.cli.commands.main`."""
    from edgekit.cli.commands import main as run

    return run(argv)
