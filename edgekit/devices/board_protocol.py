"""What a board answers, read strictly: the runner's JSON documents checked field by field (host only).

The board is another machine: its answers are input like any file a user hands edgekit, and may be
cut short, padded by a login script, from another edgekit version, or hostile. So, as OpenSSH's
client treats what a server sends (a length checked before a packet is read, a banner filtered
through ``strnvis`` before it reaches the terminal), every answer is

- bounded in size before it is read (:mod:`edgekit.devices.remote` stops ssh past a bound),
- strict UTF-8 JSON: no NaN or Infinity, nested at most :data:`MAX_DEPTH` deep,
- one of the runner's documents, each field of its type, every number finite (and not negative where
  it is a time or a count), no field unknown,
- and its text shown with control characters escaped.

Anything else is a :class:`MalformedAnswer` (exit 9): one line naming the board's answer as malformed,
with what to do.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any, NamedTuple, TypedDict, cast

from edgekit.errors import DeviceError, EdgekitError, InputError, MissingDependencyError, UsageError

#: A board's answer as read: raw JSON, each field checked by this module (classify's is then read into its record).
Answer = dict[str, Any]

#: Each field of a document and the function that checks it (``(value, where) -> value``).
Fields = dict[str, Callable[[Any, str], Any]]


class ProbeDocument(TypedDict):
    """What ``probe`` found on the board: its Python, the packages the runner needs, the files already there.

    The one type of this document: ``probe`` runs from the runner's source sent over stdin before anything is
    installed there (standard library only, no records.py), so it writes a plain dict, which only
    :func:`edgekit.devices.remote.deploy` reads, after :func:`read_probe` checked every field."""

    python: str
    executable: str
    packages: dict[str, bool | str | None]  # numpy, pycoral, tflite_runtime, ai_edge_litert: bool; pillow: version
    files: dict[str, str]  # path under --path -> sha256


#: The runner's errors by exit code (another code is a DeviceError's).
RUNNER_ERRORS: dict[int, type[EdgekitError]] = {
    cls.exit_code: cls for cls in (UsageError, InputError, MissingDependencyError, DeviceError)
}


MAX_DEPTH = 16  # the runner's documents nest 4 deep (a classify document's results, their top, its entries)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_VERSION = re.compile(r"\d{1,4}\.\d{1,4}\.\d{1,4}")


class MalformedAnswer(DeviceError):
    """The board answered something that is not the runner's document (exit 9)."""


def shown(text: str) -> str:
    """Board text as it may reach a terminal: control characters (ESC, CR, newlines, C1) as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class _Bad(Exception):
    """Why a document is malformed (a path into it and what is wrong)."""


def _depth(doc: Any) -> int:
    """How deep ``doc`` nests (iterative: a document near the recursion limit is measured, not recursed into)."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > MAX_DEPTH:
                return depth
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node))
    return deepest


def parse(data: bytes) -> Any:
    """The JSON document in ``data``, or _Bad: not UTF-8, not one JSON document, NaN/Infinity, too deep."""

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Bad(f"not UTF-8 (byte {exc.start})") from None
    if not text.strip():
        raise _Bad("nothing")
    try:
        doc = json.loads(text, parse_constant=no_constant)
    except RecursionError:
        raise _Bad(f"JSON nested more than {MAX_DEPTH} deep") from None
    except ValueError as exc:
        why = str(exc).splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        raise _Bad(f"not one JSON document ({why})") from None
    if _depth(doc) > MAX_DEPTH:
        raise _Bad(f"JSON nested more than {MAX_DEPTH} deep")
    return doc


# ------------------------------------------------------------------------------------ field checks
def _text(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise _Bad(f"{where} is not a string")
    return shown(v)


def _opt_text(v: Any, where: str) -> str | None:
    return None if v is None else _text(v, where)


def _flag(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise _Bad(f"{where} is not true or false")
    return v


def _int(v: Any, where: str, low: int = 0) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < low:
        raise _Bad(f"{where} is not an integer >= {low}")
    return v


def _opt_int(v: Any, where: str, low: int = 0) -> int | None:
    return None if v is None else _int(v, where, low)


def _number(v: Any, where: str, low: float | None = 0.0) -> float:
    """A finite number (``low`` or more; any when ``low`` is None): a time, a score."""
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or (low is not None and v < low):
        raise _Bad(f"{where} is not a finite number" + (f" >= {low:g}" if low is not None else ""))
    return float(v) if isinstance(v, float) else v


def _opt_number(v: Any, where: str) -> float | None:
    return None if v is None else _number(v, where)


def _list(v: Any, where: str, item: Callable[[Any, str], Any]) -> list:
    if not isinstance(v, list):
        raise _Bad(f"{where} is not a list")
    return [item(x, f"{where}[{i}]") for i, x in enumerate(v)]


def _opt_list(v: Any, where: str, item: Callable[[Any, str], Any]) -> list | None:
    return None if v is None else _list(v, where, item)


def _object(v: Any, where: str, fields: dict[str, Callable[[Any, str], Any]]) -> Answer:
    """``v`` as an object with exactly ``fields``, each checked (and its text escaped) by its function."""
    if not isinstance(v, dict):
        raise _Bad(f"{where} is not an object")
    missing = [k for k in fields if k not in v]
    if missing:
        raise _Bad(f"{where} has no {missing[0]!r}")
    extra = sorted(k for k in v if k not in fields)
    if extra:
        raise _Bad(f"{where} has an unknown field {shown(extra[0])!r}")
    return {k: check(v[k], f"{where}.{k}" if where != "the document" else k) for k, check in fields.items()}


def _null(v: Any, where: str) -> None:
    if v is not None:
        raise _Bad(f"{where} is not null")


def _sha256(v: Any, where: str) -> str:
    if not isinstance(v, str) or not _SHA256.fullmatch(v):
        raise _Bad(f"{where} is not a sha256")
    return v


# ------------------------------------------------------------------------------------ the documents
def _files(v: Any, where: str) -> dict[str, str]:
    if not isinstance(v, dict):
        raise _Bad(f"{where} is not an object")
    for k in v:
        _text(k, f"a name in {where}")
        if _CONTROL.search(k):
            raise _Bad(f"{where} names a file with a control character")
    return {k: _sha256(s, f"{where}[{shown(k)!r}]") for k, s in v.items()}


def _python_version(v: Any, where: str) -> str:
    if not isinstance(v, str) or not _VERSION.fullmatch(v):
        raise _Bad(f"{where} is not a version such as 3.7.3")
    return v


def _package_version(v: Any, where: str) -> str | None:
    """A package's version as its module says it (``9.5.0``, ``7.0.0.post3``), or None when it is not there."""
    if v is not None and (not isinstance(v, str) or not re.fullmatch(r"\d{1,6}(\.[0-9A-Za-z+_-]{1,16}){0,5}", v)):
        raise _Bad(f"{where} is not a version such as 9.5.0")
    return v


PROBE: Fields = {
    "python": _python_version,
    "executable": _text,
    "packages": lambda v, w: _object(
        v,
        w,
        {
            "numpy": _flag,
            "pillow": _package_version,
            "pycoral": _flag,
            "tflite_runtime": _flag,
            "ai_edge_litert": _flag,
        },
    ),
    "files": _files,
}

_TOP: Fields = {"id": _int, "label": _opt_text, "score": lambda v, w: _number(v, w, None)}
CLASSIFY: Fields = {
    "model": _text,
    "device": _text,
    "backend": _text,
    "first_inference_ms": _opt_number,
    "results": lambda v, w: _list(
        v,
        w,
        lambda r, wr: _object(
            r,
            wr,
            {"image": _text, "ms": _number, "top": lambda t, wt: _list(t, wt, lambda e, we: _object(e, we, _TOP))},
        ),
    ),
    "errors": lambda v, w: _list(v, w, lambda e, we: _object(e, we, {"image": _text, "error": _text})),
}


_BOX: Fields = {k: (lambda v, w: _number(v, w, None)) for k in ("xmin", "ymin", "xmax", "ymax")}


def _detection(v: Any, where: str) -> Answer:
    """One object: id, label, score, bbox in pixels, and bbox_normalized when the runner knew the image's size."""
    fields: Fields = {
        "id": _int,
        "label": _opt_text,
        "score": lambda s, ws: _number(s, ws, None),
        "bbox": lambda b, wb: _object(b, wb, _BOX),
    }
    if isinstance(v, dict) and "bbox_normalized" in v:
        fields["bbox_normalized"] = lambda b, wb: _object(b, wb, _BOX)
    return _object(v, where, fields)


def _layout(v: Any, where: str) -> Answer:
    """The layout the host sent, as the runner read it back: it must still be a layout (the host reads it)."""
    from edgekit.results.detect import DetectionLayout

    if not isinstance(v, dict):
        raise _Bad(f"{where} is not an object")
    try:
        return DetectionLayout.from_dict(v).to_dict()  # a ValueError naming the field for what is no layout
    except ValueError:
        raise _Bad(f"{where} is not a detection layout") from None


DETECT: Fields = {
    "model": _text,
    "device": _text,
    "backend": _text,
    "layout": _layout,
    "conf": _number,
    "iou": _number,
    "max_det": lambda v, w: _int(v, w, 1),
    "first_inference_ms": _opt_number,
    "results": lambda v, w: _list(
        v,
        w,
        lambda r, wr: _object(
            r,
            wr,
            {
                "image": _text,
                "width": lambda x, wx: _int(x, wx, 1),
                "height": lambda x, wx: _int(x, wx, 1),
                "invoke_ms": _number,
                "postprocess_ms": _number,
                "objects": lambda o, wo: _list(o, wo, _detection),
            },
        ),
    ),
    "errors": lambda v, w: _list(v, w, lambda e, we: _object(e, we, {"image": _text, "error": _text})),
    "notes": lambda v, w: _list(v, w, _text),
}


def _benchmark_fields() -> dict[str, Callable[[Any, str], Any]]:
    from edgekit.board.latency import PERCENTILES

    fields: dict[str, Callable[[Any, str], Any]] = {
        "model": _text,
        "device": _text,
        "backend": _text,
        "threads": lambda v, w: _opt_int(v, w, 1),
        "load_ms": _number,
        "first_inference_ms": _number,
        "iterations": lambda v, w: _int(v, w, 1),
        "warmup": _int,
        "latencies_ms": lambda v, w: _list(v, w, _number),
        "count": lambda v, w: _int(v, w, 1),
        "min_ms": _number,
        "max_ms": _number,
        "mean_ms": _number,
        "throughput_per_s": _number,
        "machine": lambda v, w: _object(
            v,
            w,
            {
                "platform": _text,
                "processor": _text,
                "cpus": _opt_int,
                "governors": lambda g, wg: _opt_list(g, wg, _text),
            },
        ),
        "notes": lambda v, w: _list(v, w, _text),
        "warnings": lambda v, w: _list(v, w, _text),
        "postprocess": _null,
        "comparison": _null,
    }
    fields.update({f"p{q}_ms": _number for q in PERCENTILES})
    return fields


ERROR = {
    "error": lambda v, w: _object(
        v, w, {"message": _text, "hint": _opt_text, "exit_code": lambda c, wc: _int(c, wc, 1)}
    )
}


def malformed(destination: str, what: str, why: str, hint: str) -> MalformedAnswer:
    return MalformedAnswer(f"the answer of {destination} to {what} is malformed: {why}", hint)


def read(data: bytes, fields: dict[str, Callable[[Any, str], Any]], destination: str, what: str, hint: str) -> Answer:
    """The runner's document in ``data`` (stdout), checked against ``fields``; MalformedAnswer (exit 9) when not."""
    try:
        return _object(parse(data), "the document", fields)
    except _Bad as bad:
        raise malformed(destination, what, str(bad), hint) from None


def read_probe(data: bytes, destination: str, hint: str) -> ProbeDocument:
    # read checked every field of PROBE, ProbeDocument's fields
    return cast(ProbeDocument, read(data, PROBE, destination, "listing the target folder", hint))


def read_classify(data: bytes, destination: str, hint: str, sent: set[str], k: int | None) -> Answer:
    """A classify document naming only images that were sent, each once, with at most ``k`` classes each (the
    document of :class:`edgekit.results.classify.ClassifyResult`, checked stricter than its ``from_dict``: finite
    numbers, no negative time; :func:`edgekit.devices.remote.classify` reads it into that record)."""
    doc = read(data, CLASSIFY, destination, "classifying", hint)
    _sent_once(doc, sent, destination, "classifying", hint)
    if k is not None and any(len(r["top"]) > k for r in doc["results"]):
        raise malformed(destination, "classifying", f"more than --top-k {k} classes for an image", hint)
    return doc


class DetectAsked(NamedTuple):
    """What the host asked a board's detect to run with (``layout``: the document sent)."""

    conf: float
    iou: float
    max_det: int
    layout: Answer  # as the runner echoes it


def read_detect(data: bytes, destination: str, hint: str, sent: set[str], asked: DetectAsked) -> Answer:
    """A detect document naming only images that were sent, each once, that ran what was ``asked`` (its ``conf``,
    ``iou``, ``max_det`` and ``layout``, the document sent): at most ``max_det`` objects an image, each scoring at
    least ``conf``, of one of the layout's classes, its box inside its image (the document of
    :class:`edgekit.results.detect.DetectResult`; :func:`edgekit.devices.remote.detect` reads it into that record)."""
    doc = read(data, DETECT, destination, "detecting", hint)
    _sent_once(doc, sent, destination, "detecting", hint)
    why = _not_asked(doc, asked)
    if why:
        raise malformed(destination, "detecting", why, hint)
    return doc


_SLACK = 0.01  # pixels: boxes are clipped to the image, then rounded to 2 decimals; scores to 6


def _not_asked(doc: Answer, asked: DetectAsked) -> str | None:
    """What in the board's detect document differs from what was asked (None when nothing does)."""
    for key, said, sent in (
        ("conf", doc["conf"], asked.conf),
        ("iou", doc["iou"], asked.iou),
        ("max_det", doc["max_det"], asked.max_det),
    ):
        if said != sent:
            return f"it ran with {key} {said!r}, not the {sent!r} sent"
    if json.dumps(doc["layout"], sort_keys=True) != json.dumps(asked.layout, sort_keys=True):
        return f"it decoded another layout ({shown(str(doc['layout'].get('kind')))}) than the one sent"
    classes = int(asked.layout["num_classes"])
    for r in doc["results"]:
        if len(r["objects"]) > asked.max_det:
            return f"more than --max-det {asked.max_det} objects for an image"
        for o in r["objects"]:
            b = o["bbox"]
            if not (
                -_SLACK <= b["xmin"] <= b["xmax"] <= r["width"] + _SLACK
                and -_SLACK <= b["ymin"] <= b["ymax"] <= r["height"] + _SLACK
            ):
                corners = [b["xmin"], b["ymin"], b["xmax"], b["ymax"]]
                return f"a box {corners} outside its {r['width']}x{r['height']} image"
            if o["score"] < asked.conf - 1e-6:
                return f"a score {o['score']!r} below the --conf {asked.conf!r} sent"
            if o["id"] < 0 or (classes > 0 and o["id"] >= classes):
                return f"class id {o['id']} is not one of the model's {classes} classes"
    return None


def _sent_once(doc: Answer, sent: set[str], destination: str, what: str, hint: str) -> None:
    seen: set[str] = set()
    for entry in doc["results"] + doc["errors"]:
        if entry["image"] not in sent or entry["image"] in seen:
            why = "names an image that was not sent" if entry["image"] not in sent else "names an image twice"
            raise malformed(destination, what, f"{why} ({entry['image']!r})", hint)
        seen.add(entry["image"])


def read_benchmark(data: bytes, destination: str, hint: str, n: int, warmup: int) -> Answer:
    """A benchmark document of ``n`` timed runs after ``warmup``, its summary within its latencies."""
    doc = read(data, _benchmark_fields(), destination, "benchmarking", hint)
    lat = doc["latencies_ms"]
    if not (doc["iterations"] == n and doc["warmup"] == warmup and doc["count"] == len(lat) == n):
        raise malformed(destination, "benchmarking", f"not {n} latencies after {warmup} warm-up runs", hint)
    low, high = min(lat), max(lat)
    slack = 1e-9 * high  # a mean of equal latencies may round a hair above them
    inside = [doc[k] for k in doc if k.startswith("p") and k.endswith("_ms")] + [doc["mean_ms"]]
    if doc["min_ms"] != low or doc["max_ms"] != high or not all(low - slack <= v <= high + slack for v in inside):
        raise malformed(destination, "benchmarking", "its summary does not match its latencies", hint)
    return doc


def read_error(data: bytes) -> EdgekitError | None:
    """The error the runner's error document (``{"error": {message, hint, exit_code}}``) in ``data`` says, as the
    runner had it (the class of its exit code: :data:`RUNNER_ERRORS`), or None."""
    try:
        said = _object(parse(data), "the document", ERROR)["error"]
    except _Bad:
        return None
    return RUNNER_ERRORS.get(said["exit_code"], DeviceError)(said["message"], said["hint"])
