"""The actor layer's replies: failures as they travel, and decoding replies into values or
errors; and what is said of a call's arguments that cannot be pickled. Shared by the client (:mod:`.actor_mesh`, :mod:`.proc_mesh`) and the proc server.

Request header: ``(call_id, op, *fields)``, the operation codes and header layouts in
:mod:`mesh_client._src.runtime.ops`. Reply header: ``(call_id, status)``, payload after it.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import traceback
from collections.abc import Iterable
from types import TracebackType
from typing import Any, NoReturn

from mesh_client._src.actor.errors import (
    ActorError,
    ConnectionBroken,
    RemoteException,
    SupervisionError,
)
from mesh_client._src.runtime import peers
from mesh_client._src.runtime.futures import Future
from mesh_client._src.wire import serialization

# A reply status beside peers.OK/ERROR/LOST: the actor has failed (or was stopped); the payload
# is one UTF-8 segment, the supervision report.
DEAD = 3


@dataclasses.dataclass
class Failure:
    """An exception raised in a proc, as it travels back to the caller.

    The exception object travels as a pickle of its own inside this one (:meth:`__reduce__`):
    one whose class the caller cannot import or rebuild (a module only the proc has, an
    ``__init__`` that wants other arguments) is then a :class:`RemoteException` there, with its
    type, text and remote traceback, instead of an unpickling error that loses all three.

    ``sent`` marks an exception a program passed to ``Port.exception``: as in Monarch, its
    receiver raises that exception itself (:meth:`raise_sent`), not an ActorError around it."""

    exception: BaseException | None
    type_name: str
    text: str
    traceback: str
    unrebuilt: str = ""  # why the exception could not be unpickled where this arrived ("": it was)
    sent: bool = False

    @classmethod
    def capture(cls, exc: BaseException, sent: bool = False) -> Failure:
        tb = "".join(traceback.format_exception(type(exc), exc, _user_frames(exc.__traceback__)))
        return cls(exc, type(exc).__qualname__, text_of(exc), tb, sent=sent)

    def __reduce__(self) -> tuple[Any, ...]:
        pickled = None  # an exception that cannot be pickled arrives as a RemoteException
        if self.exception is not None:
            try:
                pickled = [bytes(s) for s in serialization.dumps(self.exception)]
            except Exception:
                pass
        return _rebuild, (self.type_name, self.text, self.traceback, pickled, self.sent)

    def to_error(self, message: str) -> ActorError:
        exc = self.exception if self.exception is not None else RemoteException(self.type_name, self.text)
        note = (f" (a RemoteException here: the exception could not be unpickled in this process: "
                f"{self.unrebuilt}; is its class importable here, and rebuilt from its args?)") if self.unrebuilt else ""
        return ActorError(exc, f"{message}: {self.type_name}: {self.text}{note}", self.traceback)

    def raise_sent(self, message: str) -> NoReturn:
        """Raise what was sent with ``Port.exception``: the exception itself, as Monarch's
        receivers do (without a remote traceback: Monarch pickles none), so a ported
        ``except ValueError:`` catches it; one this process cannot rebuild is an ActorError
        that says why (Monarch raises the unpickling error instead)."""
        if self.exception is None:
            raise self.to_error(message)
        raise self.exception


def _rebuild(type_name: str, text: str, tb: str, pickled: list[bytes] | None, sent: bool = False) -> Failure:
    """Unpickle a :class:`Failure`: its exception if this process can rebuild it."""
    exception: BaseException | None = None
    unrebuilt = ""
    if pickled is not None:
        try:
            exception = serialization.loads(pickled)
        except Exception as exc:
            unrebuilt = f"{type(exc).__name__}: {text_of(exc)}"
    return Failure(exception, type_name, text, tb, unrebuilt, sent)


def text_of(exc: BaseException) -> str:
    """``str(exc)``, or what ``traceback`` prints when that fails: a bad ``__str__`` in a user's
    exception class must not end the thread reporting it (its caller would wait for ever)."""
    try:
        return str(exc)
    except Exception:
        return "<exception str() failed>"


def raise_unpicklable(what: str, exc: Exception, values: Iterable[Any]) -> NoReturn:
    """Raise the error of ``what`` (a call's arguments, a spawn) that cannot be pickled, naming
    it, and for a Future among ``values`` (a call whose ``.get()`` was left out: it pickles as a
    lock) what to do. A pickling error (TypeError, PicklingError) keeps its type; any other
    (raised by some object's own reduce) is raised as it is."""
    if not isinstance(exc, (TypeError, pickle.PicklingError)):
        raise exc
    hint = ""
    if any(isinstance(value, Future) for value in values):
        hint = "; one of them is a Future, which cannot be sent: pass its value (call .get(), or await it, first)"
    text = f"cannot pickle {what}: {type(exc).__name__}: {text_of(exc)}{hint}"
    raise (TypeError(text) if isinstance(exc, TypeError) else pickle.PicklingError(text)) from exc


def undecodable(what: str, where: str, exc: Exception) -> ActorError:
    """The error of a call whose result arrived but cannot be unpickled in this process."""
    return ActorError(exc, f"{what} on {where} returned a value this process cannot unpickle: "
                           f"{type(exc).__name__}: {text_of(exc)} (is its class importable here?)", "")


_SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ASYNCIO = os.path.join(os.path.dirname(os.__file__), "asyncio")
# An async endpoint's exception is raised again by the concurrent future the actor thread waits on.
_CONCURRENT = os.path.join(os.path.dirname(os.__file__), "concurrent")


def _user_frames(tb: TracebackType | None) -> TracebackType | None:
    """Skip the proc server's own frames at the top, so tracebacks start in user code."""
    start = tb
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith((_SRC, _ASYNCIO, _CONCURRENT)):
        tb = tb.tb_next
    return tb or start


def encode_failure(exc: BaseException, sent: bool = False) -> list[bytes | memoryview]:
    """``sent``: ``exc`` was passed to ``Port.exception`` (see :class:`Failure`)."""
    return serialization.dumps(Failure.capture(exc, sent))


def decode_reply(what: str, where: str, raw: tuple[int, Any, Any]) -> Any:
    """Turn a raw reply into its value, or raise ActorError / SupervisionError."""
    status, data, extra = raw
    if status == peers.OK:
        try:
            return serialization.loads(data) if data else None
        except Exception as exc:
            raise undecodable(what, where, exc) from None
    if status == peers.ERROR:
        failure: Failure = serialization.loads(data)
        if failure.sent:  # an explicit response port's port.exception(e)
            failure.raise_sent(f"{what} on {where} sent an exception through its response port")
        raise failure.to_error(f"{what} failed on {where}")
    if status == DEAD:
        raise SupervisionError(f"{endpoint_call(what)} failed, {dead_report(data)}")
    peer: peers.Peer = extra
    if isinstance(peer, peers.Peer) and peer.relinked() is not None:  # the proc lives on: only the link broke
        raise ConnectionBroken(f"{endpoint_call(what)} failed: {peer.loss_message(data)}")
    ran_on = "the process it ran in" if what.startswith("bootstrap ") else "the process this actor was running on"  # Monarch's words
    raise SupervisionError(f"{endpoint_call(what)} failed, {ran_on} failed: {peer.loss_message(data)}")


def failed(fut: Any) -> bool:
    """Whether a completed request's raw reply is a failure (an error, a dead actor, a lost proc)."""
    raw = fut.peek_raw()
    return isinstance(raw, tuple) and len(raw) == 3 and raw[0] != peers.OK


def dead_report(data: Any) -> str:
    """The report carried by a DEAD reply."""
    return b"".join(bytes(s) for s in data).decode("utf-8", "replace")


def endpoint_call(what: str) -> str:
    """Monarch names a call ``Endpoint call mesh.method()`` in supervision errors."""
    return "Endpoint call " + what[len("Actor call ") :] + "()" if what.startswith("Actor call ") else what
