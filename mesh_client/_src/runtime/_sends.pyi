"""Types of the native socket write (_sends.c); see streams.py for what it is for."""

from types import NotImplementedType

def send(fd: int, pieces: list[bytes], box: list[int], flags: int = 0, /) -> int | NotImplementedType: ...
