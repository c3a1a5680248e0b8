"""Types of the native waits (_waits.c); see waits.py for what they are for."""

API: int

class Bell:
    def ring(self) -> None: ...
    def wait(self, timeout: float | None = None, spin_ns: int = 0, paced: bool = True, /) -> bool: ...

class Pace:
    def average_ns(self) -> int: ...

def poll(
    epfd: int,
    timeout: float | None = None,
    spin_ns: int = 0,
    rings: list[Bell] | None = None,
    pace: Pace | None = None,
    /,
) -> list[tuple[int, int]]: ...
