"""The ``edgekit`` command line: each command parses, calls the library and renders text or --json.

No logic lives here, and nothing heavy is imported at module level: ``edgekit --help`` must not
import TensorFlow (each command imports what it needs when it runs).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

import click

from edgekit import __version__
from edgekit.errors import EdgekitError, InternalError


def _debug_requested(ctx: click.Context) -> bool:
    return bool(ctx.find_root().meta.get("edgekit.debug") or os.environ.get("EDGEKIT_DEBUG"))


class _Group(click.Group):
    """Turns every EdgekitError into one line on stderr and its exit code; anything else is a bug."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except EdgekitError as exc:
            if _debug_requested(ctx):
                raise
            _fail(exc)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
        except Exception as exc:  # a bug: say so, briefly
            if _debug_requested(ctx):
                raise
            _fail(InternalError(f"internal error: {type(exc).__name__}: {exc}",
                                "this is a bug in edgekit; rerun with --debug and report the traceback"))


def _fail(exc: EdgekitError) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(exc.exit_code)


def _set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.find_root().meta["edgekit.debug"] = True
    return value


debug_option = click.option("--debug", is_flag=True, expose_value=False, callback=_set_debug, is_eager=True,
                            help="Show the full traceback on errors.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document (schema in the README).")
quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress bars or informational messages.")


def command(fn: Callable) -> Callable:
    """Register a subcommand with the options every command shares."""
    return cli.command()(debug_option(fn))


def emit(as_json: bool, data: Any, render: Callable[[Any], str]) -> None:
    """Print ``data`` as JSON, or as the text ``render`` makes of it."""
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        click.echo(render(data))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="edgekit")
@debug_option
def cli() -> None:
    """Keras image classifiers onto Google's Coral Edge TPU.

    \b
    Typical flow:
      edgekit quantize model.h5 --calib images/      # full-int8 .tflite, verified
      edgekit check model_int8.tflite                # offline Edge TPU op mapping
      edgekit compile model_int8.tflite              # runs edgetpu_compiler
      edgekit classify image.jpg -m model_int8_edgetpu.tflite
    """


# --------------------------------------------------------------------------------------- inspect
def _render_inspect(d: dict[str, Any]) -> str:
    def tensor_line(t: dict[str, Any]) -> str:
        shape = "x".join(map(str, t["shape"]))
        sig = "" if t["shape_signature"] == t["shape"] else f" (signature {t['shape_signature']})"
        q = "" if t["scale"] is None else (
            f"  scale={t['scale']:.6g} zero_point={t['zero_point']}" if not isinstance(t["scale"], list)
            else f"  per-channel ({len(t['scale'])} scales)")
        return f"  {t['name'] or '<unnamed>'}: {t['dtype']} [{shape}]{sig}{q}"

    lines = [
        f"{d['path']}: {d['size_bytes']:,} bytes, {d['subgraphs']} subgraph(s), {len(d['ops'])} ops",
        f"Edge TPU compiled: {'yes' if d['edgetpu_compiled'] else 'no'}",
        f"Quantization: {d['quantization']}",
        f"Shapes: {'DYNAMIC (some dimension is -1 in shape_signature)' if d['dynamic_shapes'] else 'static'}",
        f"Parameters: {d['param_bytes']:,} bytes",
    ]
    if d["min_runtime_version"]:
        lines.append(f"Min TFLite runtime: {d['min_runtime_version']}")
    lines.append("Inputs:")
    lines += [tensor_line(t) for t in d["inputs"]]
    lines.append("Outputs:")
    lines += [tensor_line(t) for t in d["outputs"]]
    lines.append("Ops:")
    lines += [f"  {h['count']:>4} x {h['name']} v{h['version']}" for h in d["op_histogram"]]
    if d["metadata"]:
        lines.append(f"Metadata: {', '.join(d['metadata'])}")
    return "\n".join(lines)


@command
@click.argument("model", type=click.Path(dir_okay=False))
@json_option
def inspect(model: str, as_json: bool) -> None:
    """Summarize a .tflite model without TensorFlow: I/O, quantization, ops, shapes."""
    from edgekit import tflite_model

    emit(as_json, tflite_model.summary(tflite_model.load(model)), _render_inspect)


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="edgekit")


if __name__ == "__main__":
    main()
