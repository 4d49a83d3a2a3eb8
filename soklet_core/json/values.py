"""The closed, immutable JSON value model.

Six kinds and no others: :class:`JsonObject`, :class:`JsonArray`, :class:`JsonString`, :class:`JsonNumber`,
:class:`JsonBoolean` and :class:`JsonNull`. Values have no public constructors; use the named factories
(``JsonString.from_value``, ``JsonNumber.from_value``, ``JsonObject.builder()`` …) or ``JsonValue.from_python``.

Numbers are exact :class:`decimal.Decimal` values. Equality and hashing follow numeric value (``1``, ``1.0`` and
``1E+0`` are equal and hash alike), also inside objects and arrays; a boolean never equals a number.
"""

from __future__ import annotations

import operator
import re
from bisect import bisect_right
from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, Sequence, ValuesView
from decimal import Decimal
from typing import Any, Final, NoReturn, TypeAlias, TypeVar, Union, overload

from .errors import JsonError, JsonErrorReason
from .limits import MAX_DEPTH, MAX_NUMBER_TOKEN_CHARS
from .numbers import check_decimal

__all__ = [
    "JsonArray",
    "JsonArrayBuilder",
    "JsonBoolean",
    "JsonNull",
    "JsonNumber",
    "JsonObject",
    "JsonObjectBuilder",
    "JsonString",
    "JsonValue",
    "PythonJson",
]

#: Plain Python data that converts to a JsonValue.
PythonJson: TypeAlias = Union[  # a recursive alias needs the string form
    bool, int, Decimal, str, Mapping[str, "PythonJson"], Sequence["PythonJson"], "JsonValue", None
]

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
#: Integers strictly inside ±this bound spell in at most 1,024 characters, sign included, so they are within every
#: number limit (their exponent is below their length) without a check.
_PLAIN_INT_BOUND: Final = 10 ** (MAX_NUMBER_TOKEN_CHARS - 1)
_T = TypeVar("_T", bound="JsonValue")
#: The type of a default given to :meth:`JsonObject.get`.
_D = TypeVar("_D")


def _immutable(self: object, *_: object) -> NoReturn:
    raise AttributeError(f"{type(self).__name__} is immutable")


class JsonValue:
    """Base of the closed JSON value model. Not constructible; not subclassable outside this module."""

    __slots__ = ()
    __setattr__ = _immutable
    __delattr__ = _immutable

    def __init__(self) -> None:
        raise TypeError(f"{type(self).__name__} has no public constructor; use its named factories")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        if cls.__module__ != __name__:
            raise TypeError("the JSON value model is closed")
        super().__init_subclass__(**kwargs)

    @staticmethod
    def from_python(value: PythonJson) -> JsonValue:
        """Convert plain Python data (dict, list/tuple, str, int, Decimal, bool, None) to a JsonValue.

        Floats are refused (binary floating point is not exact); pass a ``Decimal`` or a string instead.
        """
        return _from_python(value, 0)

    def to_python(self) -> Any:
        """Plain Python data: dict, list, str, Decimal, bool or None."""
        raise NotImplementedError

    def __copy__(self: _T) -> _T:
        return self

    def __deepcopy__(self: _T, memo: object) -> _T:
        return self

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return (JsonValue.from_python, (self.to_python(),))


def _new(cls: type[_T], **fields: object) -> _T:
    obj = object.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(obj, name, value)
    return obj


_allocate = object.__new__
_store = object.__setattr__


def new_string(value: str) -> JsonString:
    """A JsonString of text already known to be valid (the parser's fast path; no checks)."""
    obj = _allocate(JsonString)
    _store(obj, "_value", value)
    return obj


def new_number(value: Decimal) -> JsonNumber:
    """A JsonNumber of a value already known to be within the limits (the parser's fast path; no checks)."""
    obj = _allocate(JsonNumber)
    _store(obj, "_value", value)
    return obj


def new_object(members: dict[str, JsonValue]) -> JsonObject:
    """A JsonObject that takes ownership of ``members`` (the caller keeps no reference)."""
    obj = _allocate(JsonObject)
    _store(obj, "_members", members)
    _store(obj, "_hash", None)
    return obj


def new_array(items: tuple[JsonValue, ...]) -> JsonArray:
    """A JsonArray of ``items``."""
    obj = _allocate(JsonArray)
    _store(obj, "_items", items)
    _store(obj, "_hash", None)
    return obj


class _PackedNumbers(Sequence["JsonNumber"]):
    """The items of a large array of plain numbers, held as chunks of their text (see ``number_runs``).

    A ``JsonNumber`` is built when an item is read (about 150 bytes each otherwise, against the 7 a decimal such
    as ``1.0001`` takes in the text); an array whose items are all read one after the other never holds them all.
    Equal and hashing like the tuple of those numbers, so the array compares as any other.
    """

    __slots__ = ("_chunks", "_ends")

    def __init__(self, chunks: tuple[str, ...]) -> None:
        self._chunks = chunks
        ends: list[int] = []
        total = 0
        for chunk in chunks:
            total += chunk.count(",") + 1
            ends.append(total)
        self._ends = ends

    def __len__(self) -> int:
        return self._ends[-1]

    def __iter__(self) -> Iterator[JsonNumber]:
        for chunk in self._chunks:
            for token in chunk.split(","):
                yield new_number(Decimal(token))

    @overload
    def __getitem__(self, index: int) -> JsonNumber: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[JsonNumber, ...]: ...
    def __getitem__(self, index: int | slice) -> JsonNumber | tuple[JsonNumber, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("array index out of range")
        block = bisect_right(self._ends, index)
        first = self._ends[block - 1] if block else 0
        return new_number(Decimal(self._chunks[block].split(",")[index - first]))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _PackedNumbers | tuple):
            return NotImplemented
        return len(self) == len(other) and all(map(operator.eq, self, other))

    def __hash__(self) -> int:
        return hash(tuple(self))


def new_packed_array(chunks: tuple[str, ...]) -> JsonArray:
    """A JsonArray of the numbers in ``chunks``: comma-separated tokens the reference scanner accepts, none with an
    exponent part (so within every number limit); the parser's packed form of a large array of numbers."""
    obj = _allocate(JsonArray)
    _store(obj, "_items", _PackedNumbers(chunks))
    _store(obj, "_hash", None)
    return obj


class JsonString(JsonValue):
    """A JSON string: any sequence of Unicode scalar values (lone surrogates are refused)."""

    __slots__ = ("_value",)
    _value: str

    @classmethod
    def from_value(cls, value: str) -> JsonString:
        """The string ``value``. Raises ``JsonError(LONE_SURROGATE)`` for text that is not valid Unicode."""
        return new_string(_checked_text(value))

    @property
    def value(self) -> str:
        """The exact text."""
        return self._value

    def to_python(self) -> str:
        return self._value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JsonString) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return f"JsonString({self._value!r})"


def _checked_text(value: object) -> str:
    if type(value) is not str:
        if not isinstance(value, str):
            raise TypeError("JSON strings and member names are str")
        value = str(value)
    if not value.isascii() and _SURROGATE.search(value):
        raise JsonError(JsonErrorReason.LONE_SURROGATE)
    return value


def _checked_number(value: object) -> JsonNumber:
    if type(value) is int and -_PLAIN_INT_BOUND < value < _PLAIN_INT_BOUND:
        return new_number(Decimal(value))
    if isinstance(value, bool) or not isinstance(value, Decimal | int):
        raise TypeError("JsonNumber.from_value takes a Decimal or an int")
    number = Decimal(value)
    # The held spelling is what serialize writes, so it must be a token the parser accepts, limits included.
    check_decimal(number)
    return new_number(number)


class JsonNumber(JsonValue):
    """An exact JSON number. ``value`` keeps the supplied scale (``3.50`` stays ``Decimal('3.50')``)."""

    __slots__ = ("_value",)
    _value: Decimal

    @classmethod
    def from_value(cls, value: Decimal | int) -> JsonNumber:
        """The number ``value``, which must be finite and within the production number limits.

        ``int`` is accepted as an exact integer; ``bool`` and ``float`` are refused with ``TypeError``.
        """
        return _checked_number(value)

    @property
    def value(self) -> Decimal:
        """The exact value, with the scale it was given."""
        return self._value

    def to_python(self) -> Decimal:
        return self._value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JsonNumber) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return f"JsonNumber({str(self._value)!r})"


class JsonBoolean(JsonValue):
    """``true`` or ``false``. Never equal to a number."""

    __slots__ = ("_value",)
    _value: bool

    @classmethod
    def from_value(cls, value: bool) -> JsonBoolean:
        """The shared ``true`` or ``false`` value."""
        if not isinstance(value, bool):
            raise TypeError("JsonBoolean.from_value takes a bool")
        return _TRUE if value else _FALSE

    @property
    def value(self) -> bool:
        """The boolean."""
        return self._value

    def to_python(self) -> bool:
        return self._value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JsonBoolean) and other._value is self._value

    def __hash__(self) -> int:
        return hash(("json-boolean", self._value))

    def __repr__(self) -> str:
        return f"JsonBoolean({self._value})"


class JsonNull(JsonValue):
    """``null``: one shared instance."""

    __slots__ = ()

    @classmethod
    def instance(cls) -> JsonNull:
        """The one ``null`` value."""
        return _NULL

    def to_python(self) -> None:
        return None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JsonNull)

    def __hash__(self) -> int:
        return hash("json-null")

    def __repr__(self) -> str:
        return "JsonNull()"


class JsonObject(JsonValue, Mapping[str, JsonValue]):
    """An immutable JSON object. Member order is kept as given; equality ignores it."""

    __slots__ = ("_hash", "_members")
    _members: dict[str, JsonValue]
    _hash: int | None

    @classmethod
    def builder(cls) -> JsonObjectBuilder:
        """A builder; ``put`` refuses a repeated member name."""
        return JsonObjectBuilder()

    @classmethod
    def empty_instance(cls) -> JsonObject:
        """The empty object ``{}``."""
        return _EMPTY_OBJECT

    @classmethod
    def from_mapping(cls, members: Mapping[str, PythonJson]) -> JsonObject:
        """An object with the members of ``members`` (values converted as by ``JsonValue.from_python``)."""
        result = _from_python(members, 0)
        if not isinstance(result, JsonObject):
            raise TypeError("from_mapping takes a mapping")
        return result

    @classmethod
    def _of(cls, members: dict[str, JsonValue]) -> JsonObject:
        return new_object(members)

    def __getitem__(self, name: str) -> JsonValue:
        return self._members[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._members)

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, name: object) -> bool:
        return name in self._members

    # The Mapping mixins would go through __getitem__ and __iter__ (a Python frame per call or per member); the
    # server reads members this way on every request, so each is the members dict's own C method. Its views are
    # read-only, so the object stays immutable.
    @overload
    def get(self, name: str, /) -> JsonValue | None: ...
    @overload
    def get(self, name: str, /, default: JsonValue | _D) -> JsonValue | _D: ...
    def get(self, name: str, /, default: object = None) -> object:
        """The member ``name``, or ``default`` (None unless given) when there is none."""
        return self._members.get(name, default)

    def keys(self) -> KeysView[str]:
        """The member names, in member order."""
        return self._members.keys()

    def values(self) -> ValuesView[JsonValue]:
        """The member values, in member order."""
        return self._members.values()

    def items(self) -> ItemsView[str, JsonValue]:
        """The ``(name, value)`` pairs, in member order."""
        return self._members.items()

    def to_python(self) -> dict[str, Any]:
        return {name: value.to_python() for name, value in self._members.items()}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JsonObject) and other._members == self._members

    def __hash__(self) -> int:
        if self._hash is None:
            object.__setattr__(self, "_hash", hash(frozenset(self._members.items())))
        assert self._hash is not None
        return self._hash

    def __repr__(self) -> str:
        return f"JsonObject({self._members!r})"


class JsonArray(JsonValue, Sequence[JsonValue]):
    """An immutable JSON array."""

    __slots__ = ("_hash", "_items")
    # A tuple, or a packed run of numbers from a large document (read item by item, never all at once).
    _items: tuple[JsonValue, ...] | _PackedNumbers
    _hash: int | None

    @classmethod
    def builder(cls) -> JsonArrayBuilder:
        """A builder that appends with ``add``."""
        return JsonArrayBuilder()

    @classmethod
    def empty_instance(cls) -> JsonArray:
        """The empty array ``[]``."""
        return _EMPTY_ARRAY

    @classmethod
    def of(cls, *items: PythonJson) -> JsonArray:
        """An array of ``items`` (converted as by ``JsonValue.from_python``)."""
        return cls._of(tuple(_from_python(item, 1) for item in items))

    @classmethod
    def _of(cls, items: tuple[JsonValue, ...]) -> JsonArray:
        return new_array(items)

    @overload
    def __getitem__(self, index: int) -> JsonValue: ...
    @overload
    def __getitem__(self, index: slice) -> JsonArray: ...
    def __getitem__(self, index: int | slice) -> JsonValue | JsonArray:
        if isinstance(index, slice):
            return JsonArray._of(self._items[index])
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[JsonValue]:
        return iter(self._items)

    def to_python(self) -> list[Any]:
        return [item.to_python() for item in self._items]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JsonArray) and other._items == self._items

    def __hash__(self) -> int:
        if self._hash is None:
            object.__setattr__(self, "_hash", hash(self._items))
        assert self._hash is not None
        return self._hash

    def __repr__(self) -> str:
        return f"JsonArray({list(self._items)!r})"


class JsonObjectBuilder:
    """Collects members for one :class:`JsonObject`. Not thread-safe; build once."""

    __slots__ = ("_members",)

    def __init__(self) -> None:
        self._members: dict[str, JsonValue] = {}

    def put(self, name: str, value: PythonJson) -> JsonObjectBuilder:
        """Add member ``name``; a repeated name raises ``JsonError(DUPLICATE_MEMBER)``."""
        key = _checked_text(name)
        if key in self._members:
            raise JsonError(JsonErrorReason.DUPLICATE_MEMBER)
        self._members[key] = _from_python(value, 1)
        return self

    def put_all(self, members: Mapping[str, PythonJson]) -> JsonObjectBuilder:
        """Add every member of ``members``, in its order."""
        for name, value in members.items():
            self.put(name, value)
        return self

    def build(self) -> JsonObject:
        """The object; the builder keeps no reference to it."""
        return JsonObject._of(dict(self._members))


class JsonArrayBuilder:
    """Collects items for one :class:`JsonArray`."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: list[JsonValue] = []

    def add(self, value: PythonJson) -> JsonArrayBuilder:
        """Append ``value``."""
        self._items.append(_from_python(value, 1))
        return self

    def add_all(self, values: Iterable[PythonJson]) -> JsonArrayBuilder:
        """Append each of ``values``."""
        for value in values:
            self.add(value)
        return self

    def build(self) -> JsonArray:
        """The array."""
        return JsonArray._of(tuple(self._items))


_TRUE: Final = _new(JsonBoolean, _value=True)
_FALSE: Final = _new(JsonBoolean, _value=False)
_NULL: Final = _new(JsonNull)
_EMPTY_OBJECT: Final = JsonObject._of({})
_EMPTY_ARRAY: Final = JsonArray._of(())


def _from_python(value: object, depth: int) -> JsonValue:
    # Hot for every state and result built in code: exact types first (the common case), then the general rules.
    kind = type(value)
    if kind is str:
        return new_string(_checked_text(value))
    if kind is int:
        return _checked_number(value)
    if kind is dict or kind is list:
        if depth >= MAX_DEPTH:
            raise JsonError(JsonErrorReason.DEPTH_EXCEEDED)
        if kind is dict:
            return new_object(
                {_checked_text(name): _from_python(item, depth + 1) for name, item in value.items()}  # type: ignore[attr-defined]
            )
        return new_array(tuple([_from_python(item, depth + 1) for item in value]))  # type: ignore[attr-defined]
    if value is None:
        return _NULL
    if kind is bool:
        return _TRUE if value else _FALSE
    if isinstance(value, JsonValue):
        return value
    if isinstance(value, bool):
        return _TRUE if value else _FALSE
    if isinstance(value, str):
        return new_string(_checked_text(value))
    if isinstance(value, int | Decimal):
        return _checked_number(value)
    if isinstance(value, float):
        raise TypeError("floats are not exact; pass a Decimal or a str")
    if depth >= MAX_DEPTH:
        raise JsonError(JsonErrorReason.DEPTH_EXCEEDED)
    if isinstance(value, Mapping):
        members: dict[str, JsonValue] = {}
        for name, item in value.items():
            members[_checked_text(name)] = _from_python(item, depth + 1)
        return JsonObject._of(members)
    if isinstance(value, list | tuple):
        return JsonArray._of(tuple(_from_python(item, depth + 1) for item in value))
    raise TypeError(f"{type(value).__name__} is not JSON data")
