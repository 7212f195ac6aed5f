"""The base of edgekit's typed results: frozen dataclasses whose ``to_dict()`` is the ``--json`` document.

A result type declares its fields in the order of its document; :class:`Record` gives it
``to_dict()`` and ``from_dict()`` from the field types:

- ``bool``, ``int``, ``float``, ``str`` hold that JSON kind only: a bool is no integer, an integer is a
  number; ``int`` stays within 64 bits; None (null) only where the type is ``Optional``;
- a ``str`` :class:`~enum.Enum` (a verdict, a target, a confidence) or a ``Literal`` is one of its values;
- a nested :class:`Record` is its own document; ``Tuple[X, ...]`` is a list (``Tuple[X, Y]`` one of that
  length); a ``Union`` is the first of its types that takes the value;
- a frozen dataclass of edgekit's that is no Record but has ``to_dict()``/``from_dict()`` (a manifest's
  :class:`~edgekit.board.manifest.FileEntry`) is its own document too, its keys named after its fields checked against their types before its own ``from_dict`` reads it;
- ``Mapping[K, V]`` is an object; ``Any`` holds a sub-document as it is, at most :data:`MAX_DEPTH` deep; both
  are made read-only (:func:`freeze`: mappings become :class:`types.MappingProxyType`, lists become tuples) so
  a result cannot change.

A type whose document leaves some of its fields out (an older document of it, or one embedded in a
bundle's manifest) names them in ``document_omits``; they keep their defaults.

``from_dict`` refuses a document with a key the type does not know, without one it needs, or with a value
its field's type does not hold (a ``ValueError`` naming the field's path, e.g. ``InspectResult.ops[3].index:
expected an integer, got 'x'``; an ``Optional`` field left out is None): a document that drifted from its
type, or a hostile one, fails loudly instead of losing a field or crashing whatever shows it.
Standard library (and edgekit.errors) only, cheap to import. This module ships to a Python 3.7 board with the
result modules whose records the runtime core returns (``board.runner.SHIPPED_MODULES``), so it stays 3.7 (vermin
checks it), and so do their annotations, which ``typing.get_type_hints`` evaluates there: ``Optional[X]`` and
``Tuple[X, ...]``, not ``X | None`` or ``tuple[X, ...]`` (a test resolves every shipped record's fields on 3.7).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import functools
import numbers
import sys
import types
import typing
from typing import Any, ClassVar, Dict, FrozenSet, Mapping, Tuple, TypeVar

from edgekit.errors import EdgekitError

R = TypeVar("R", bound="Record")


#: The deepest a free-form sub-document (``Any``) may nest: edgekit's own go a few levels deep, a hostile one
#: thousands (a RecursionError, not an answer).
MAX_DEPTH = 32
#: An integer field holds a count, a size, an id or a version: an integer beyond 64 bits is no such thing (and one
#: of 4,300+ digits cannot even be written back as text).
INT_RANGE = (-(2**63), 2**63 - 1)
_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string", type(None): "null"}
_MAPPINGS = (Mapping, dict, collections.abc.Mapping)


def freeze(value: Any, where: str = "value", depth: int = 0) -> Any:
    """A read-only copy of a JSON-like value: dicts -> MappingProxyType, lists -> tuples, recursively (a
    ``ValueError`` naming ``where`` when it nests deeper than :data:`MAX_DEPTH`)."""
    if isinstance(value, Record) or _is_document_type(type(value)):
        return value
    if depth >= MAX_DEPTH and isinstance(value, (Mapping, list, tuple)):
        raise ValueError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, Mapping):
        return types.MappingProxyType({k: freeze(v, f"{where}.{k}", depth + 1) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value))
    return value


def shown(value: Any) -> str:
    """A value found in a document, for a message: short, and never the repr of a deep or huge one."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        digits = int(value.bit_length() * 0.30103)  # log10(2): repr() refuses past 4,300 digits
        return repr(value) if abs(value) < 10**30 else f"an integer of about {digits} digits"
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:40]) + "..."
    if isinstance(value, (Mapping, list, tuple)):
        return "an object" if isinstance(value, Mapping) else "a list"
    return repr(value) if isinstance(value, float) else f"a {type(value).__name__}"


def _is_document_type(tp: Any) -> bool:
    """A dataclass with its own ``to_dict``/``from_dict`` that is no Record (see the module's docstring)."""
    return (
        isinstance(tp, type)
        and dataclasses.is_dataclass(tp)
        and callable(getattr(tp, "from_dict", None))
        and callable(getattr(tp, "to_dict", None))
    )


def thaw(value: Any) -> Any:
    """The plain JSON-like value of a frozen one (records become their documents, enums their values)."""
    if isinstance(value, Record) or _is_document_type(type(value)):
        return value.to_dict()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


# Python 3.7 (a board's) has neither typing.get_origin/get_args (3.8) nor Literal (3.8) nor ``X | Y`` (3.10): the
# same answers from the typing objects' own attributes, and a marker no origin is where a feature is absent.
_get_origin = getattr(typing, "get_origin", None) or (lambda tp: getattr(tp, "__origin__", None))  # novermin
_get_args = getattr(typing, "get_args", None) or (lambda tp: getattr(tp, "__args__", None) or ())  # novermin
_LITERAL = getattr(typing, "Literal", object())  # novermin
_UNION_TYPE = getattr(types, "UnionType", ())  # novermin


def _is_union(tp: Any) -> bool:
    return _get_origin(tp) is typing.Union or isinstance(tp, _UNION_TYPE)


def _is_optional(tp: Any) -> bool:
    return _is_union(tp) and type(None) in _get_args(tp)


def _strip_optional(tp: Any) -> Any:
    """``Optional[X]`` -> X; a Union of several -> that Union without None."""
    if _is_union(tp):
        args = tuple(a for a in _get_args(tp) if a is not type(None))
        return args[0] if len(args) == 1 else typing.Union[args]
    return tp


def _kind(tp: Any) -> str:
    """What a field type holds, in a message's words."""
    if tp in _KINDS:
        return _KINDS[tp]
    if _get_origin(tp) is _LITERAL:
        return "one of " + ", ".join(repr(a) for a in _get_args(tp))
    if _get_origin(tp) in (tuple, Tuple):
        args = _get_args(tp)
        return "a list" if not args or args[-1] is Ellipsis else f"a list of {len(args)}"
    if _is_union(tp):
        return " or ".join(_kind(a) for a in _get_args(tp))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(repr(m.value) for m in tp)
    return "a value" if tp is Any else "an object"


def _load_primitive(tp: type, value: Any, where: str) -> Any:
    """A bool, int, float or str as declared: a bool is no integer, an integer is a number (numpy's scalars
    become Python's); an integer beyond 64 bits, or too large for a float where a number is declared, is refused."""
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):  # made in this process
        value = bool(value)
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if tp in (int, float) and isinstance(value, numbers.Integral) and number:
        value = int(value)
        if INT_RANGE[0] <= value <= INT_RANGE[1] or (tp is float and abs(value) <= sys.float_info.max):
            return value  # as written (1, not 1.0, where a number is declared)
        raise ValueError(
            f"{where}: expected {'an integer of at most 64 bits' if tp is int else 'a number'}, got {shown(value)}"
        )
    if tp is float and number:
        return float(value)
    if tp in (str, bool, type(None)) and isinstance(value, tp):
        return value
    raise ValueError(f"{where}: expected {_KINDS[tp]}, got {shown(value)}")


def _load_union(options: Tuple[Any, ...], value: Any, where: str) -> Any:
    """``value`` as the first of ``options`` that takes it (records: the first whose ``from_dict`` does)."""
    reasons = []
    for tp in options:
        try:
            return _load(tp, value, where)
        except ValueError as exc:
            reasons.append(str(exc))
    if all(isinstance(tp, type) and issubclass(tp, Record) for tp in options):
        raise ValueError(f"{where}: not one of {[tp.__name__ for tp in options]} ({'; '.join(reasons)})")
    raise ValueError(f"{where}: expected {' or '.join(_kind(tp) for tp in options)}, got {shown(value)}")


def _load_document(tp: Any, value: Any, where: str) -> Any:
    """A document of a non-Record dataclass (its own ``from_dict``), refused as a Record's would be: its keys
    named after its fields must hold what those fields' types hold, and a refusal is a ``ValueError`` naming
    where it is, not the KeyError or TypeError of reading it."""
    if isinstance(value, tp):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected an object, got {shown(value)}")
    hints, fields = _fields(tp)
    for name in fields:
        if name in value:
            _load(hints[name], value[name], f"{where}.{name}")
    try:
        built = tp.from_dict(value)
    except KeyError as exc:
        raise ValueError(f"{where}: the field {exc.args[0]!r} is missing") from None
    except (TypeError, ValueError, OverflowError, EdgekitError) as exc:
        raise ValueError(f"{where}: not a {tp.__name__} document ({exc})") from None
    unknown = [k for k in value if k not in fields and k not in built.to_dict()]
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown} (this edgekit's {tp.__name__} has {list(fields)})")
    return built


def _load_tuple(tp: Any, value: Any, where: str) -> Tuple[Any, ...]:
    """A list as ``Tuple[X, ...]`` (any length) or ``Tuple[X, Y]`` (that length) holds it."""
    args = _get_args(tp)
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{where}: expected {_kind(tp)}, got {shown(value)}")
    if not args or args[-1] is Ellipsis:
        items = (args[0] if args else Any,) * len(value)
    elif len(args) == len(value):
        items = args
    else:
        raise ValueError(f"{where}: expected {_kind(tp)}, got a list of {len(value)}")
    return tuple(_load(item, v, f"{where}[{i}]") for i, (item, v) in enumerate(zip(items, value)))


def _load_mapping(tp: Any, value: Any, where: str) -> Mapping[str, Any]:
    """An object as ``Mapping[K, V]`` holds it, read-only."""
    key, item = _get_args(tp) or (str, Any)
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected an object, got {shown(value)}")
    return types.MappingProxyType(
        {_load(key, k, f"{where} (a key)"): _load(item, v, f"{where}.{k}") for k, v in value.items()}
    )


def _load_choice(tp: Any, value: Any, where: str) -> Any:
    """A value of a ``str`` :class:`~enum.Enum` or a ``Literal``."""
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    choices = [m.value for m in typing.cast("type[enum.Enum]", tp)] if isinstance(tp, type) else list(_get_args(tp))
    for choice in choices:
        if type(value) is type(choice) and value == choice:
            return tp(value) if isinstance(tp, type) else value
    raise ValueError(f"{where}: {shown(value)} is not one of {choices}")


def _load(tp: Any, value: Any, where: str) -> Any:
    """``value`` from a document, as the field type ``tp`` holds it (a ``ValueError`` naming ``where`` when it
    holds no such value)."""
    if value is None and (tp is Any or _is_optional(tp)):
        return None
    tp = _strip_optional(tp)
    origin = _get_origin(tp)
    if tp in _KINDS:
        return _load_primitive(tp, value, where)
    if _is_union(tp):
        return _load_union(_get_args(tp), value, where)
    if origin is _LITERAL or isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _load_choice(tp, value, where)
    if origin in (tuple, Tuple):
        return _load_tuple(tp, value, where)
    if origin in _MAPPINGS:
        return _load_mapping(tp, value, where)
    if isinstance(tp, type) and issubclass(tp, Record):
        if isinstance(value, tp):  # built already (a result made from another's parts)
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: expected an object, got {shown(value)}")
        return tp.from_dict(value, where)
    if _is_document_type(tp):
        return _load_document(tp, value, where)
    if value is None:
        raise ValueError(f"{where}: expected {_kind(tp)}, got null")
    return freeze(value, where)


@functools.lru_cache(maxsize=None)
def _fields(cls: type) -> tuple[dict[str, Any], dict[str, dataclasses.Field]]:
    """A record type's resolved field types and its fields, worked out once per type."""
    return typing.get_type_hints(cls), {f.name: f for f in dataclasses.fields(cls)}


class Record:
    """Mixin of the frozen result dataclasses: ``to_dict()`` (the ``--json`` document) and ``from_dict()``."""

    document_omits: ClassVar[FrozenSet[str]] = frozenset()  # fields this type's document leaves out

    def to_dict(self) -> Dict[str, Any]:
        return {
            f.name: thaw(getattr(self, f.name))
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
            if f.name not in self.document_omits
        }

    @classmethod
    def from_dict(cls: type[R], document: Mapping[str, Any], where: str | None = None) -> R:
        where = where or cls.__name__
        if not isinstance(document, Mapping):
            raise ValueError(f"{where}: expected an object, got {type(document).__name__}")
        hints, fields = _fields(typing.cast(type, cls))  # a class, hashable (R's instances are not)
        unknown = [k for k in document if k not in fields]
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {unknown} (this edgekit's {cls.__name__} has {list(fields)})")
        kwargs = {}
        for name, f in fields.items():
            if name in document:
                kwargs[name] = _load(hints[name], document[name], f"{where}.{name}")
            elif f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
                continue
            elif _is_optional(hints[name]):  # an Optional left out: None
                kwargs[name] = None
            else:
                raise ValueError(f"{where}: the field {name!r} is missing")
        return cls(**kwargs)
