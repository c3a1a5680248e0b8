"""Reading a local peer's memory: one copy of a large ``bytes`` instead of a socket's two.

Over an AF_UNIX link the two ends are processes of one user on one host, so the kernel lets
one read the other's memory with ``process_vm_readv(2)`` (the check ptrace makes: same user,
and Yama's ``ptrace_scope`` where set). A socket copies a 1 MiB segment twice, into socket
buffers and out of them; a read of the sender's own pages copies it once, straight into the
receiver's final object. :mod:`mesh_client._src.wire.pulled` says which segments travel so and
what the receiver sends back; this module holds the operating system's side only.

Nothing here widens who can do what: the peer is authenticated (it holds the mesh token, and
either side already unpickles what the other sends), the kernel decides whether the read is
allowed, and each side proves the read works (:func:`probe`) before the other relies on it.
``PROCMESH_PEER_READS=0`` turns it off (every segment goes through the socket, as over TCP).
"""

from __future__ import annotations

import os
import socket
import struct
import sys
from typing import Any

from mesh_client._src.wire import receiving

#: Set to 0 to send every segment through the socket.
ENV = "PROCMESH_PEER_READS"

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def _syscall() -> tuple[Any, Any] | None:
    """``process_vm_readv`` and its iovec type, or None where there is none (not Linux, no ctypes)."""
    if not sys.platform.startswith("linux") or not receiving.copy_free():
        return None
    try:
        import ctypes

        class IoVec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.process_vm_readv  # a CDLL function: the GIL is released during the copy
        fn.argtypes = [ctypes.c_int, ctypes.POINTER(IoVec), ctypes.c_ulong, ctypes.POINTER(IoVec), ctypes.c_ulong, ctypes.c_ulong]
        fn.restype = ctypes.c_ssize_t
        return fn, IoVec
    except (ImportError, AttributeError, OSError):
        return None


_READV = _syscall()


def enabled() -> bool:
    """Whether this process reads peers' memory and lets peers read its own."""
    return _READV is not None and os.environ.get(ENV, "1") != "0"


def address_of(data: bytes) -> int:
    """Where ``data``'s bytes are in this process (a CPython ``bytes`` never moves)."""
    return id(data) + receiving.BYTES_OFFSET


class Reader:
    """Reads the memory of one peer process (``pid``), into new ``bytes`` objects."""

    __slots__ = ("pid",)

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def pull(self, address: int, size: int) -> bytes:
        """``size`` bytes at ``address`` in the peer, as a new ``bytes``; OSError if the kernel
        refuses the read or reads less (the peer is gone, or the address is not mapped)."""
        assert _READV is not None
        import ctypes

        fn, iovec = _READV
        data, at = receiving.new_bytes(size)
        local, remote = iovec(at, size), iovec(address, size)
        n = fn(self.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if n != size:
            err = ctypes.get_errno() if n < 0 else 0
            raise OSError(err, f"read {n} of {size} bytes at {address:#x} in process {self.pid}: {os.strerror(err) if err else 'short read'}")
        return data


def reader_for(sock: socket.socket | None) -> Reader | None:
    """A reader of the process at the other end of ``sock``, if it is an AF_UNIX stream to a
    process of this user (the kernel's SO_PEERCRED, not anything the peer says) and reads are
    enabled; None otherwise."""
    if sock is None or not enabled() or sock.family != socket.AF_UNIX:
        return None
    try:
        pid, uid, _ = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    except (OSError, AttributeError):
        return None
    if pid <= 0 or pid == os.getpid() or uid != os.geteuid():
        return None
    return Reader(pid)


_probe: tuple[int, bytes] | None = None  # (pid, bytes) of this process's probe


def probe() -> bytes:
    """This process's probe: random bytes a peer reads back to prove it can read us (kept
    alive for the process's life; made again in a forked child, whose peers are others)."""
    global _probe
    if _probe is None or _probe[0] != os.getpid():
        _probe = (os.getpid(), os.urandom(32))
    return _probe[1]
