"""Errors the actor API raises in the caller, each saying what failed and where."""

from __future__ import annotations

from typing import Any


class ActorError(Exception):
    """An endpoint (or ``__init__``) raised; ``exception`` is the remote exception.

    The actor lives on after an endpoint error; ``str()`` includes the remote traceback.
    """

    def __init__(self, exception: BaseException, message: str = "A remote actor call failed.", traceback: str = "") -> None:
        super().__init__(exception, message, traceback)
        self.exception = exception
        self.message = message
        self.remote_traceback = traceback

    def __str__(self) -> str:
        text = self.message
        if self.remote_traceback:
            text += "\n\nRemote traceback:\n" + self.remote_traceback.rstrip()
        return text


class SupervisionError(RuntimeError):
    """The proc hosting an actor is gone (died, was killed or stopped): the call cannot complete."""


class ConnectionBroken(SupervisionError):
    """The connection to the actor's proc broke while the call was on it, but the proc is alive:
    this client reconnected to the same process (its actors and their state are kept). A call in
    flight may or may not have run (nothing is ever sent twice); the message says which. Call
    again if that is safe. A SupervisionError, so code that catches those still catches it."""


class RemoteException(Exception):
    """Stands in for a remote exception that could not be pickled back to the caller."""

    def __init__(self, type_name: str, text: str) -> None:
        super().__init__(f"{type_name}: {text}")
        self.type_name = type_name
        self.text = text

    def __reduce__(self) -> tuple[Any, ...]:  # its args are not __init__'s: passed on (a nested call) it must rebuild
        return RemoteException, (self.type_name, self.text)


class NotAnEndpoint(AttributeError, RuntimeError):
    """The method exists on the actor class but is not decorated with ``@endpoint`` (a
    RuntimeError, as Monarch's, and an AttributeError, as attribute lookups raise)."""
