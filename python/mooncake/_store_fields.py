"""Validated attributes of :class:`mooncake.store.ReplicateConfig`: assignment
converts a value the way upstream's pybind11 binding does, and raises ``TypeError``
for what the binding refuses (a negative or too large integer, a float for an
integer, an int for an enum, a str for a list, ...)."""

from __future__ import annotations

import enum
import operator
from typing import Any, Callable, List, Optional

U64_MAX = (1 << 64) - 1


def _refuse(name: str, value: Any, expected: str) -> TypeError:
    return TypeError(f"ReplicateConfig.{name}: expected {expected}, got {type(value).__name__} {value!r}")


def u64(value: Any, name: str) -> int:
    """An unsigned 64-bit integer (``size_t``/``uint64_t``): ints, bools and objects
    with ``__index__`` (enum members) in [0, 2**64 - 1]."""
    if isinstance(value, (float, str, bytes)) or value is None:
        raise _refuse(name, value, "an int in [0, 2**64 - 1]")
    try:
        n = operator.index(value)
    except TypeError:
        raise _refuse(name, value, "an int in [0, 2**64 - 1]") from None
    if not 0 <= n <= U64_MAX:
        raise _refuse(name, value, "an int in [0, 2**64 - 1]")
    return n


def optional_u64(value: Any, name: str) -> Optional[int]:
    """None, or :func:`u64`."""
    return None if value is None else u64(value, name)


def boolean(value: Any, name: str) -> bool:
    """A bool: bools, None (False), numbers, and objects whose type defines
    ``__bool__``; not strings, containers or enum members."""
    if value is None:
        return False
    if isinstance(value, (str, bytes, enum.Enum)) or not hasattr(type(value), "__bool__"):
        raise _refuse(name, value, "a bool")
    return bool(value)


def text(value: Any, name: str) -> str:
    """A string (bytes are decoded as UTF-8)."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if not isinstance(value, str):
        raise _refuse(name, value, "a str")
    return value


def text_list(value: Any, name: str) -> List[str]:
    """A new list of strings from any sequence of them other than a string."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or not hasattr(value, "__getitem__"):
        raise _refuse(name, value, "a list of str")
    return [text(v, name) for v in value]


def optional_text_list(value: Any, name: str) -> Optional[List[str]]:
    """None, or :func:`text_list`."""
    return None if value is None else text_list(value, name)


def member_of(cls: type) -> Callable[[Any, str], Any]:
    """A converter accepting only members of the enum ``cls``."""

    def convert(value: Any, name: str) -> Any:
        if not isinstance(value, cls):
            raise _refuse(name, value, f"a {cls.__name__}")
        return value

    return convert


class Field:
    """A data descriptor storing its converted value in the slot ``_<name>``."""

    def __init__(self, convert: Callable[[Any, str], Any], doc: str) -> None:
        self.convert = convert
        self.__doc__ = doc
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: Optional[type] = None) -> Any:
        if obj is None:
            return self
        return getattr(obj, "_" + self.name)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(obj, "_" + self.name, self.convert(value, self.name))
