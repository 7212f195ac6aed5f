"""How edgekit tells the user something: one small reporter (note, warn, progress), passed down.

Library functions take ``report`` (default :data:`SILENT`, which says nothing): ``note`` for what
the user may like to know (a folder was created, where the model runs), ``warn`` for what they
should act on, ``progress`` for long work (calibration, evaluation, classifying a folder, training).
The CLI passes a :class:`ConsoleReporter`: notes and progress bars on stderr unless ``--quiet`` (bars
only on a terminal), warnings always. Messages kept for later (a model's ``notes``) are strings,
and a :class:`~edgekit.errors.Caution` among them is a warning: :meth:`Reporter.tell` sorts them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO, TypeVar

from edgekit.errors import Caution

T = TypeVar("T")


class Progress:
    """A progress bar: ``update`` after each item; ``close`` (or leaving a ``with`` block) ends it."""

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Reporter:
    """Says nothing: what library code gets when nobody listens."""

    def note(self, text: str) -> None:
        pass

    def warn(self, text: str) -> None:
        pass

    def tell(self, message: str) -> None:
        """A kept message: a :class:`Caution` is a warning, anything else a note."""
        (self.warn if isinstance(message, Caution) else self.note)(str(message))

    def status(self, text: str) -> None:
        """What is running now, for a watching user only (a terminal): e.g. just before a long compile."""

    def progress(self, total: int, label: str, stream: TextIO | None = None) -> Progress:
        """A bar over ``total`` items (``stream``: where to draw it, when not the reporter's own)."""
        return Progress()

    def iterate(self, items: Iterable[T], total: int, label: str, stream: TextIO | None = None) -> Iterator[T]:
        """``items`` with a progress bar over them."""
        with self.progress(total, label, stream) as bar:
            for item in items:
                yield item
                bar.update(1)


SILENT = Reporter()


class _ClickBar(Progress):
    def __init__(self, total: int, label: str, stream: TextIO):
        import click

        self.bar = click.progressbar(length=total, label=label, file=stream)
        self.bar.render_progress()
        self.open = True

    def update(self, n: int = 1) -> None:
        self.bar.update(n)

    def close(self) -> None:
        if self.open:
            self.bar.render_finish()
            self.open = False


class ConsoleReporter(Reporter):
    """Notes (``note: ...``) unless quiet, warnings (``warning: ...``) always, bars on a terminal unless quiet."""

    def __init__(self, quiet: bool = False, echo: Callable[[str], None] | None = None, stream: TextIO | None = None):
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.echo = echo or (lambda line: print(line, file=self.stream))

    def note(self, text: str) -> None:
        if not self.quiet:
            self.echo(f"note: {text}")

    def warn(self, text: str) -> None:
        self.echo(f"warning: {text}")

    def status(self, text: str) -> None:
        if not self.quiet and getattr(self.stream, "isatty", lambda: False)():
            self.echo(text)

    def progress(self, total: int, label: str, stream: TextIO | None = None) -> Progress:
        stream = stream or self.stream
        if self.quiet or total <= 1 or not getattr(stream, "isatty", lambda: False)():
            return Progress()
        return _ClickBar(total, label, stream)


class Collector(Reporter):
    """Keeps what it is told, for a caller that shows it later (and for tests): ``notes``, ``warnings``,
    ``statuses``."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.warnings: list[str] = []
        self.statuses: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)

    def warn(self, text: str) -> None:
        self.warnings.append(text)

    def status(self, text: str) -> None:
        self.statuses.append(text)
