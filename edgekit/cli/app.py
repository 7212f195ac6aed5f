"""The click half of the command line: click's types, the ``edgekit`` group and each command's options, made from
the declarations in :mod:`edgekit.flags` (each command's when first looked up).

Imported by :func:`edgekit.cli.main` when click parses (``--help``, anything :func:`edgekit.cli.base.parse` leaves to
it) and for :data:`cli`, the group of every command (tests, the docs generator): a plain runtime command line never
imports click.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import click

import edgekit.cli.commands  # noqa: F401 (registers each command's run in RUNS: the group holds them all)
from edgekit import __version__, flags
from edgekit.cli.base import RUNS, debug_env, echo, guarded
from edgekit.errors import InputError, shown


def _debug_requested(ctx: click.Context) -> bool:
    """--debug, or EDGEKIT_DEBUG set to anything but empty, 0, false, no or off."""
    return bool(ctx.find_root().meta.get("edgekit.debug")) or debug_env()


class _Group(click.Group):
    """Turns every EdgekitError into one line on stderr and its exit code; anything else is a bug."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """In the order a Coral user works (quantize, check, compile, classify), then the tools: edgekit.flags'."""
        order = list(flags.COMMANDS)
        return sorted(self.commands, key=lambda name: (order.index(name) if name in order else len(order), name))

    def invoke(self, ctx: click.Context) -> Any:
        return guarded(
            lambda: super(_Group, self).invoke(ctx),
            lambda: _debug_requested(ctx),
            (click.exceptions.Exit, click.exceptions.Abort, click.ClickException),
        )


class _BadInputParameter(click.ClickException):
    """A path argument of the wrong kind (a folder for a file, or a file for a folder): bad input, one line, exit 3."""

    exit_code = InputError.exit_code

    def show(self, file: Any = None) -> None:
        echo(f"error: {shown(self.message)}", err=True)


class _KindPath(click.Path):
    """A click.Path whose wrong kind (``is_wrong``) is one error line and exit 3, not click's usage text."""

    wrong = ""  # what the path is when it is of the wrong kind ("folder" or "file")

    def is_wrong(self, value: str) -> bool:
        raise NotImplementedError

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from edgekit.errors import regular_file

        flag = param.opts[0] if param is not None and param.opts and param.opts[0].startswith("-") else ""
        try:
            regular_file(value, flag)  # a FIFO or a device (/dev/zero) would block or never end
        except InputError as exc:
            raise _BadInputParameter(str(exc)) from None
        if self.is_wrong(value):
            right = "file" if self.wrong == "folder" else "folder"
            flag = param.opts[0] if param is not None and param.opts and param.opts[0].startswith("-") else ""
            raise _BadInputParameter(
                f"{flag + ' ' if flag else ''}{value} is a {self.wrong}, not a {right} (pass a {right} path)"
            )
        return super().convert(value, param, ctx)


class FilePath(_KindPath):
    """A file path; a folder given instead is one error line and exit 3 (the README's bad input)."""

    wrong = "folder"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(dir_okay=False, **kwargs)

    def is_wrong(self, value: str) -> bool:
        return os.path.isdir(value)


class DirPath(_KindPath):
    """A folder path; a file given instead is one error line and exit 3 (the README's bad input)."""

    wrong = "file"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(file_okay=False, **kwargs)

    def is_wrong(self, value: str) -> bool:
        return os.path.exists(value) and not os.path.isdir(value)


class FloatRange(click.FloatRange):
    """click's FloatRange, refusing nan and infinities (a nan passes every comparison click makes)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        value = super().convert(value, param, ctx)
        if not math.isfinite(value):
            self.fail(f"{value} is not a finite number.", param, ctx)
        return value


def _set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.find_root().meta["edgekit.debug"] = True
    return value


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """--version, as click.version_option prints it (which looks up its gettext catalogue when imported)."""
    if value and not ctx.resilient_parsing:
        echo(f"edgekit, version {__version__}")
        ctx.exit()


debug_option = click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    callback=_set_debug,
    is_eager=True,
    help="Show the full traceback on errors.",
)


#: The click types of the declared path values (edgekit.flags.Option's ``type``).
_PATH_TYPES: dict[str, Callable[[], click.ParamType]] = {
    "path": click.Path,
    "file": FilePath,
    "dir": DirPath,
    "out-file": lambda: click.Path(dir_okay=False),
}


def _click_type(p: flags.Option | flags.Argument) -> Any:
    """The click type of a declared argument or option (None: text, click's default)."""
    if p.type in _PATH_TYPES:
        return _PATH_TYPES[p.type]()
    if isinstance(p, flags.Argument):  # an argument is text or a path
        return None
    if p.type == "choice":
        return click.Choice(p.choices)
    if p.type in ("int", "float") and p.minimum is None and p.maximum is None:
        return int if p.type == "int" else float
    if p.type == "int":
        return click.IntRange(
            None if p.minimum is None else int(p.minimum),  # an int option's bounds are ints
            None if p.maximum is None else int(p.maximum),
        )
    if p.type == "float":  # bounded: nan and infinities refused too
        return FloatRange(p.minimum, p.maximum, min_open=p.minimum_open)
    return None


def _click_param(p: flags.Option | flags.Argument) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The click decorator of one declared argument or option."""
    if isinstance(p, flags.Argument):
        return click.argument(p.name, type=_click_type(p), nargs=p.nargs, required=p.nargs == -1 or None)
    if p.type == "flag":
        return click.option(*p.flags, p.name, is_flag=True, help=p.help or None)
    extra = {"default": p.default, "show_default": p.show_default} if p.default is not None else {}
    return click.option(
        *p.flags,
        p.name,
        type=_click_type(p),
        required=p.required,
        metavar=p.metavar,
        multiple=p.multiple,
        help=p.help or None,
        **extra,
    )


def _click_command(name: str) -> click.Command:
    """The click command ``name``: --debug, then its arguments and options from :mod:`edgekit.flags`."""
    fn = RUNS[name]
    for param in reversed(flags.COMMANDS[name]):
        fn = _click_param(param)(fn)
    return click.command(name)(debug_option(fn))


class _Commands(MutableMapping):
    """``cli.commands``, whose click commands are made when first looked up: a run of ``edgekit classify``
    builds the options of classify alone (start-up, issue 25), ``--help`` and the docs build them all."""

    def __init__(self) -> None:
        self._made: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._made:
            if name not in RUNS:
                raise KeyError(name)
            self._made[name] = _click_command(name)
        return self._made[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._made[name] = command

    def __delitem__(self, name: str) -> None:
        self._made.pop(name, None)
        RUNS.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*RUNS, *self._made]))

    def __len__(self) -> int:
        return len(dict.fromkeys([*RUNS, *self._made]))


@click.group(cls=_Group, commands=_Commands(), context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    "-V",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version and exit.",
)
@debug_option
def cli() -> None:
    """Keras image classifiers onto Google's Coral Edge TPU.

    \b
    Typical flow:
      edgekit train images/ -o model.keras           # optional: train an Edge-TPU-friendly model
      edgekit quantize model.h5 --calib images/      # full-int8 .tflite, verified
      edgekit check model_int8.tflite                # offline Edge TPU op mapping
      edgekit compile model_int8.tflite              # runs edgetpu_compiler
      edgekit classify image.jpg -m model_int8_edgetpu.tflite
      edgekit build model.keras -o bundle/           # all of it into one deployable folder
    """
