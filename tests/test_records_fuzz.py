"""A seeded fuzzer over the result types (issue 31): every documented ``--json`` example, mutated.

Each mutation (a wrong type, a missing or extra key, a deep nesting, a huge integer, NaN...) either is
refused by ``Type.from_dict`` with a ``ValueError`` naming where, or is a document of the type: it
renders as text, writes as strict JSON and reads back as the same document. Nothing else (no
TypeError, AttributeError, RecursionError, OverflowError...) may come out of reading a document or of
showing what was read.
"""

from __future__ import annotations

import copy
import json
import math
import random
import typing
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from edgekit import results
from edgekit.cli.commands import _json_text
from edgekit.records import shown
from tests.test_docs_json import TYPES, examples, result_type

SEED = 31
MUTATIONS = 2000
Path = tuple[Any, ...]


def deep(depth: int, kind: str) -> Any:
    """A value nested ``depth`` levels (built without recursion)."""
    value: Any = 1
    for _ in range(depth):
        value = [value] if kind == "list" else (value,) if kind == "tuple" else {"a": value}
    return value


#: Values of every JSON kind (and some that only Python's json reader lets in), wrong for most fields.
ODD_VALUES = [
    "x",
    "",
    "1",
    "nan",
    "\ud800",
    0,
    1,
    -1,
    7,
    2**63,
    -(2**63) - 1,
    10**400,
    10**5000,
    0.5,
    -3.25,
    1e308,
    float("nan"),
    float("inf"),
    float("-inf"),
    True,
    False,
    None,
    [],
    [1],
    ["x"],
    [None],
    {},
    {"a": 1},
    [[1, 2], [3]],
    deep(3000, "list"),
    deep(3000, "dict"),
]


def paths(node: Any, here: Path = ()) -> Iterator[Path]:
    """Every place in a document (the root excluded), depth first; not inside a deep value put there."""
    if len(here) > 12:
        return
    if isinstance(node, dict):
        for k, v in node.items():
            yield here + (k,)
            yield from paths(v, here + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield here + (i,)
            yield from paths(v, here + (i,))


def parent_of(document: Any, path: Path) -> Any:
    for step in path[:-1]:
        document = document[step]
    return document


def mutate_once(doc: dict, rng: random.Random) -> str:
    """One mutation of ``doc``, in place, and what it did."""
    places: list[Path] = list(paths(doc))
    if not places:
        doc["surprise"] = 1
        return "extra key in an empty document"
    path = rng.choice(places)
    parent, key = parent_of(doc, path), path[-1]
    op = rng.choice(["replace", "replace", "replace", "delete", "extra", "wrap", "empty"])
    if op == "replace":
        value = rng.choice(ODD_VALUES)
        parent[key] = value
        return f"{path} = {shown(value)}"
    if op == "delete":
        del parent[key]
        return f"del {path}"
    if op == "extra":
        (parent if isinstance(parent, dict) else doc)["surprise"] = rng.choice(ODD_VALUES[:8])
        return f"extra key beside {path}"
    if op == "wrap":
        parent[key] = [parent[key]] if rng.random() < 0.5 else {"v": parent[key]}
        return f"wrap {path}"
    parent[key] = type(parent[key])() if isinstance(parent[key], (list, dict, str)) else parent[key]
    return f"empty {path}"


def mutate(document: dict, rng: random.Random) -> tuple[str, dict]:
    """A copy of ``document`` with one to three mutations, and what they were."""
    doc = copy.deepcopy(document)
    return " + ".join(mutate_once(doc, rng) for _ in range(rng.choice((1, 1, 2, 3)))), doc


def same(a: Any, b: Any) -> bool:
    """Documents equal, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b  # an integer where a number is declared may come back as written or as a float
    return type(a) is type(b) and a == b


def check(read: Callable[[dict], Any], document: dict) -> str:
    """``refused`` or ``kept``; anything but a ValueError from reading, or a kept document that does not
    show, write or read back, fails the test."""
    try:
        result = read(document)
    except ValueError as exc:
        assert str(exc).strip(), "a refusal says why"
        return "refused"
    written = result.to_dict()
    assert result.render_text() is not None
    text = _json_text(written)  # strict JSON, as --json writes it (NaN and infinities as null)
    if "NaN" not in json.dumps(written) and "Infinity" not in json.dumps(written):
        again = read(json.loads(text))  # what --json wrote reads back...
        assert _json_text(again.to_dict()) == text  # ...as the same document
    assert same(read(written).to_dict(), written)
    return "kept"


def cases() -> list[tuple[str, int, dict]]:
    found = [(command, i, json.loads(e)) for command in sorted(TYPES) for i, e in enumerate(examples(command))]
    assert found, "no documented JSON example to mutate"
    return found


def test_mutated_documents_are_read_or_refused_with_a_value_error():
    rng = random.Random(SEED)
    examples_ = cases()
    outcomes = {"refused": 0, "kept": 0}
    for n in range(MUTATIONS):
        command, i, document = examples_[n % len(examples_)]
        what, mutated = mutate(document, rng)
        read = result_type(command, document).from_dict
        try:
            outcomes[check(read, mutated)] += 1
        except Exception as exc:
            pytest.fail(f"{command} example {i}, mutation {n} ({what}): {type(exc).__name__}: {exc!s:.300}")
    # the fuzzer must exercise both ways out, or it tests nothing
    assert outcomes["refused"] > MUTATIONS // 10 and outcomes["kept"] > MUTATIONS // 10, outcomes


@pytest.mark.parametrize(
    "value, field, message",
    [
        ("x", "num_classes", "expected an integer, got 'x'"),
        (True, "num_classes", "expected an integer, got true"),
        (None, "num_classes", "expected an integer, got null"),
        (2**63, "num_classes", "expected an integer of at most 64 bits, got 9223372036854775808"),
        (10**5000, "num_classes", "expected an integer of at most 64 bits, got an integer of about 5000 digits"),
        ("1", "conf", "expected a number, got '1'"),
        (10**400, "conf", "expected a number, got an integer of about 400 digits"),
        (None, "conf", "expected a number, got null"),
        ([64], "input_hw", "expected a list of 2, got a list of 1"),
        ("boxes", "kind", "'boxes' is not one of"),
        (deep(3000, "list"), "labels", "expected a string, got a list"),
        (deep(3000, "dict"), "options", "expected true or false or an integer or a number or a string, got an object"),
    ],
    ids=lambda v: shown(v)[:20],
)
def test_a_wrong_type_is_refused_naming_the_field(value, field, message):
    document = json.loads(examples("detect")[0])
    where = document["layout"] if field in document["layout"] else document
    where[field] = value
    with pytest.raises(ValueError) as exc:
        results.DetectResult.from_dict(document)
    path = f"DetectResult.layout.{field}" if where is not document else f"DetectResult.{field}"
    assert str(exc.value).startswith(f"{path}"), str(exc.value)
    assert message in str(exc.value)


def test_right_types_are_kept_as_written():
    """An integer is a number (kept as written), None where Optional, a bool where a bool is declared."""
    document = json.loads(examples("detect")[0])
    document["conf"], document["first_inference_ms"], document["layout"]["transposed"] = 1, None, True
    result = results.DetectResult.from_dict(document)
    assert (result.conf, result.first_inference_ms, result.layout.transposed) == (1, None, True)
    assert result.to_dict() == document


def test_the_layout_kinds_are_the_runtimes():
    """The document's layout is the runtime's own (issue 33): its kind is read as the Layout the decoder switches on."""
    from edgekit.board.decode import Layout

    assert typing.get_type_hints(results.DetectionLayout)["kind"] is Layout
    document = json.loads(examples("detect")[0])
    assert results.DetectResult.from_dict(document).layout.kind is Layout(document["layout"]["kind"])


def test_a_document_type_inside_a_record_is_checked_by_its_field_types():
    """discovery's Device (no Record: it ships to the board) is held to its field types too."""
    document = json.loads(examples("devices")[0])
    assert document["devices"], "the example lists a device"
    for key, value in (("temperature_c", "hot"), ("device", 3), ("usb_id", ["1a6e"]), ("extra", 1)):
        bad = copy.deepcopy(document)
        bad["devices"][0][key] = value
        with pytest.raises(ValueError, match=r"DevicesResult\.devices\[0\]"):
            results.DevicesResult.from_dict(bad)


def test_a_free_form_value_is_capped_in_depth():
    from edgekit.records import MAX_DEPTH, freeze

    assert freeze(deep(MAX_DEPTH - 1, "list")) == deep(MAX_DEPTH - 1, "tuple")
    with pytest.raises(ValueError, match="nested deeper than"):
        freeze(deep(3000, "dict"), "doc")


@pytest.mark.filterwarnings("error")  # numpy's abs(int8(-128)) overflows with a RuntimeWarning
@pytest.mark.parametrize("value", [np.uint64(2**64 - 1), np.uint64(2**63), np.int64(-(2**63)), np.int8(-128), 2**1023])
def test_the_runtimes_records_read_numpy_integers_at_their_limits_exactly(value):
    """The runtime's records take numpy numbers: a number field keeps an integer at any width, exactly (no overflow
    in the check), an integer field refuses what does not fit 64 bits, numpy's uint64 included."""
    box = {"xmin": value, "ymin": 0, "xmax": 1, "ymax": 1}
    assert results.Object.from_dict({"id": 1, "score": value, "bbox": box}).bbox.xmin == int(value)
    if -(2**63) <= int(value) < 2**63:
        assert results.Object.from_dict({"id": value, "score": 0.5, "bbox": box}).id == int(value)
    else:
        with pytest.raises(ValueError, match=r"Object\.id: expected an integer of at most 64 bits"):
            results.Object.from_dict({"id": value, "score": 0.5, "bbox": box})
