"""The controller's source text, for remote tracebacks that show the user's lines.

A class or function of the controller's ``__main__`` (or a notebook cell) travels by value, and
its file does not exist in the proc (never on Kubernetes; locally it may have changed or gone).
:mod:`.proc_mesh` gives each spawn (and each ``run``/bootstrap) the text of the files whose code
it pickles (:func:`dumps_with_sources`, read through the controller's ``linecache``, so notebook
cells work too); the proc server puts it in its own ``linecache`` (:func:`register`, from
:mod:`mesh_client._src.server.actors` and ``dispatch``) before the code runs, so a traceback formatted there shows ``File "/path/script.py", line
N, in endpoint`` with the source line. Each text travels once per connection (:func:`not_yet_sent`: a
new proc after a restart gets it again), never with endpoint calls.
"""

from __future__ import annotations

import linecache
import threading
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from mesh_client._src.wire import serialization

#: Files larger than this are not shipped (their frames still name file and line).
MAX_FILE_CHARS = 1 << 20
#: All the files of one spawn together stay under this.
MAX_TOTAL_CHARS = 4 << 20


def collect(filenames: Iterable[str]) -> dict[str, str]:
    """The text of each file, as the controller's ``linecache`` has it (skipping unknown ones)."""
    out: dict[str, str] = {}
    total = 0
    for name in sorted(set(filenames)):
        if name.startswith("<dynamic-code>"):
            continue
        text = "".join(linecache.getlines(name))
        if not text or len(text) > MAX_FILE_CHARS or total + len(text) > MAX_TOTAL_CHARS:
            continue
        out[name] = text
        total += len(text)
    return out


def dumps_with_sources(obj: Any) -> tuple[list[bytes | memoryview], dict[str, str]]:
    """``serialization.dumps(obj)``, and the text of the files of the code it pickled by value."""
    code_files: set[str] = set()
    payload = serialization.dumps(obj, code_files)
    return payload, collect(code_files)


_sent: weakref.WeakKeyDictionary[object, set[tuple[str, int]]] = weakref.WeakKeyDictionary()
_sent_lock = threading.Lock()


def not_yet_sent(connection: object, texts: Mapping[str, str]) -> dict[str, str]:
    """The part of ``texts`` not sent over ``connection`` (a peer) before; noted as sent now."""
    if not texts:
        return {}
    with _sent_lock:
        sent = _sent.setdefault(connection, set())
        out = {name: text for name, text in texts.items() if (name, hash(text)) not in sent}
        sent.update((name, hash(text)) for name, text in out.items())
    return out


def register(sources: Mapping[str, str]) -> None:
    """Make ``linecache`` (and so ``traceback``) find each file's lines in this process.

    The entry has no modification time, so ``linecache.checkcache`` keeps it, also when no file
    of that name exists here; it is the text the shipped code was compiled from."""
    for name, text in sources.items():
        lines = text.splitlines(keepends=True)
        linecache.cache[name] = (len(text), None, lines, name)
