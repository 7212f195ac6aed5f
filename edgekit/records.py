"""The base of edgekit's typed results: frozen dataclasses whose ``to_dict()`` is the ``--json`` document.

A result type declares its fields in the order of its document; :class:`Record` gives it
``to_dict()`` and ``from_dict()`` from the field types:

- a ``str`` :class:`~enum.Enum` (a verdict, a target, a confidence) is its value in the document;
- a nested :class:`Record` is its own document; ``Tuple[X, ...]`` is a list; a ``Union`` of records is
  the first of them whose ``from_dict`` takes the document;
- a frozen dataclass of edgekit's that is no Record but has ``to_dict()``/``from_dict()`` (a
  :class:`~edgekit.preprocess.PreprocessSpec`, a manifest's :class:`~edgekit.manifest.FileEntry`: modules
  shipped to a Python 3.7 board, which cannot import this one) is its own document too;
- ``Mapping[str, Any]`` / ``Any`` hold a sub-document as it is, made read-only (:func:`freeze`:
  mappings become :class:`types.MappingProxyType`, lists become tuples) so a result cannot change.

A type whose document leaves some of its fields out (an older document of it, or one embedded in a
bundle's manifest) names them in ``document_omits``; they keep their defaults.

``from_dict`` refuses a document with a key the type does not know or without one it needs (a
``ValueError`` naming it; an ``Optional`` field left out is None): a document that drifted from its
type fails loudly instead of losing a field.
Standard library only, cheap to import.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from typing import Any, ClassVar, Dict, FrozenSet, Mapping, Tuple, TypeVar

R = TypeVar("R", bound="Record")


def freeze(value: Any) -> Any:
    """A read-only copy of a JSON-like value: dicts -> MappingProxyType, lists -> tuples, recursively."""
    if isinstance(value, Record) or _is_document_type(type(value)):
        return value
    if isinstance(value, Mapping):
        return types.MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def _is_document_type(tp: Any) -> bool:
    """A dataclass with its own ``to_dict``/``from_dict`` that is no Record (see the module's docstring)."""
    return isinstance(tp, type) and dataclasses.is_dataclass(tp) and callable(getattr(tp, "from_dict", None)) \
        and callable(getattr(tp, "to_dict", None))


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


def _strip_optional(tp: Any) -> Any:
    """``Optional[X]`` -> X; a Union of several records -> that Union without None; another Union -> Any."""
    if typing.get_origin(tp) is typing.Union or isinstance(tp, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
        return typing.Union[tuple(args)] if all(isinstance(a, type) and issubclass(a, Record) for a in args) else Any
    return tp


def _load_union(options: Tuple[type, ...], value: Any, where: str) -> Any:
    """The first record type of ``options`` whose ``from_dict`` takes ``value``."""
    reasons = []
    for tp in options:
        if isinstance(value, tp):
            return value
        try:
            return tp.from_dict(value, where)
        except ValueError as exc:
            reasons.append(str(exc))
    raise ValueError(f"{where}: not one of {[tp.__name__ for tp in options]} ({'; '.join(reasons)})")


def _load_document(tp: Any, value: Any, where: str) -> Any:
    """A document of a non-Record dataclass (its own ``from_dict``), refused as a Record's would be: a
    ``ValueError`` naming where it is, not the KeyError or TypeError of reading it."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected an object, got {type(value).__name__}")
    try:
        return tp.from_dict(value)
    except KeyError as exc:
        raise ValueError(f"{where}: the field {exc.args[0]!r} is missing") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: not a {tp.__name__} document ({exc})") from None


def _load(tp: Any, value: Any, where: str) -> Any:
    """``value`` from a document, as the field type ``tp`` holds it."""
    if value is None:
        return None
    tp = _strip_optional(tp)
    if typing.get_origin(tp) is typing.Union:
        return _load_union(typing.get_args(tp), value, where)
    if _is_document_type(tp) and not issubclass(tp, Record):
        return value if isinstance(value, tp) else _load_document(tp, value, where)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            raise ValueError(f"{where}: {value!r} is not one of {[m.value for m in tp]}") from None
    if isinstance(tp, type) and issubclass(tp, Record):
        if isinstance(value, tp):  # built already (a result made from another's parts)
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: expected an object, got {type(value).__name__}")
        return tp.from_dict(value, where)
    if typing.get_origin(tp) in (tuple, Tuple):
        args = typing.get_args(tp)
        item = args[0] if args else Any
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{where}: expected a list, got {type(value).__name__}")
        return tuple(_load(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    return freeze(value)


@functools.lru_cache(maxsize=None)
def _fields(cls: type) -> tuple[dict[str, Any], dict[str, dataclasses.Field]]:
    """A record type's resolved field types and its fields, worked out once per type."""
    return typing.get_type_hints(cls), {f.name: f for f in dataclasses.fields(cls)}


class Record:
    """Mixin of the frozen result dataclasses: ``to_dict()`` (the ``--json`` document) and ``from_dict()``."""

    document_omits: ClassVar[FrozenSet[str]] = frozenset()  # fields this type's document leaves out

    def to_dict(self) -> Dict[str, Any]:
        return {f.name: thaw(getattr(self, f.name)) for f in dataclasses.fields(self)  # type: ignore[arg-type]
                if f.name not in self.document_omits}

    @classmethod
    def from_dict(cls: type[R], document: Mapping[str, Any], where: str | None = None) -> R:
        where = where or cls.__name__
        if not isinstance(document, Mapping):
            raise ValueError(f"{where}: expected an object, got {type(document).__name__}")
        hints, fields = _fields(cls)
        unknown = [k for k in document if k not in fields]
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {unknown} (this edgekit's {cls.__name__} has "
                             f"{list(fields)})")
        kwargs = {}
        for name, f in fields.items():
            if name in document:
                kwargs[name] = _load(hints[name], document[name], f"{where}.{name}")
            elif f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
                continue
            elif _strip_optional(hints[name]) is not hints[name]:  # an Optional left out: None
                kwargs[name] = None
            else:
                raise ValueError(f"{where}: the field {name!r} is missing")
        return cls(**kwargs)
