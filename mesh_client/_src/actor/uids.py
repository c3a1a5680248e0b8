"""Monarch's identity values ``Uid`` and ``ProcId``, with its text forms.

A Uid is a singleton (a bare label, ``"service"``) or an instance: a random 64-bit value with
an optional label, written ``label<base58>`` (``<base58>`` without one), Flickr's base58
alphabet, as Monarch writes them. A ProcId wraps one. They are values: equal when their text
is, hashable, picklable, and parsed back by ``from_string``. procmesh names its procs by mesh and
rank (``policy[gpus=1]``) and its actors by ``context().actor_instance.actor_id``, so nothing
here hands these out; they serve programs that make and compare their own.
"""

from __future__ import annotations

import re
import secrets

_ALPHABET = "123456789abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ"  # Flickr's base58, as Monarch's
_INSTANCE = re.compile(r"^([A-Za-z0-9_\-]*)<([1-9A-HJ-NP-Za-km-z]+)>$")
_SINGLETON = re.compile(r"^[A-Za-z0-9_\-]+$")


def _encode(value: int) -> str:
    digits = ""
    while value:
        value, digit = divmod(value, 58)
        digits = _ALPHABET[digit] + digits
    return digits or _ALPHABET[0]


def _decode(text: str) -> int:
    value = 0
    for char in text:
        value = value * 58 + _ALPHABET.index(char)
    if value >= 1 << 64:
        raise ValueError(f"invalid uid: the value {text!r} does not fit 64 bits")
    return value


class Uid:
    """A unique identifier: a singleton label, or an instance value with an optional label."""

    __slots__ = ("_label", "_value")

    def __init__(self, label: str | None, value: int | None) -> None:
        self._label = label
        self._value = value

    @staticmethod
    def anonymous() -> Uid:
        """A fresh instance without a label."""
        return Uid(None, secrets.randbits(64))

    @staticmethod
    def instance(label: str | None = None) -> Uid:
        """A fresh instance, shown with ``label``."""
        return Uid(label, secrets.randbits(64))

    @staticmethod
    def instance_from_value(value: int, label: str | None = None) -> Uid:
        if not isinstance(value, int) or not 0 <= value < 1 << 64:
            raise ValueError(f"a uid value is a 64-bit unsigned integer; got {value!r}")
        return Uid(label, value)

    @staticmethod
    def from_string(uid: str) -> Uid:
        """Parse ``label<base58>``, ``<base58>`` or a singleton ``label``."""
        match = _INSTANCE.match(uid)
        if match:
            return Uid(match.group(1) or None, _decode(match.group(2)))
        if _SINGLETON.match(uid):
            return Uid(uid, None)
        raise ValueError(f"invalid uid: {uid!r}: expected 'label<base58>', '<base58>' or a singleton 'label' "
                         f"(letters, digits, '_' and '-')")

    @property
    def label(self) -> str | None:
        return self._label

    @property
    def is_instance(self) -> bool:
        return self._value is not None

    @property
    def is_singleton(self) -> bool:
        return self._value is None

    @property
    def instance_value(self) -> int | None:
        return self._value

    def __str__(self) -> str:
        if self._value is None:
            return self._label or ""
        return f"{self._label or ''}<{_encode(self._value)}>"

    def __repr__(self) -> str:
        return f"Uid({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Uid) and (self._label, self._value) == (other._label, other._value)

    def __hash__(self) -> int:
        return hash((self._label, self._value))

    def __reduce__(self) -> tuple[object, ...]:
        return (Uid, (self._label, self._value))


class ProcId:
    """The identity of a proc, as a Uid."""

    __slots__ = ("_uid",)

    def __init__(self, uid: Uid) -> None:
        if not isinstance(uid, Uid):
            raise TypeError(f"ProcId takes a Uid; got {type(uid).__name__}")
        self._uid = uid

    @staticmethod
    def from_string(proc_id: str) -> ProcId:
        return ProcId(Uid.from_string(proc_id))

    @property
    def uid(self) -> Uid:
        return self._uid

    @property
    def label(self) -> str | None:
        return self._uid.label

    def __str__(self) -> str:
        return str(self._uid)

    def __repr__(self) -> str:
        return f"ProcId({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProcId) and self._uid == other._uid

    def __hash__(self) -> int:
        return hash(("proc", self._uid))

    def __reduce__(self) -> tuple[object, ...]:
        return (ProcId, (self._uid,))
