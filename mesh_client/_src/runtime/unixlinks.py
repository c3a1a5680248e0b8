"""AF_UNIX links to proc servers on this host: the same wire as TCP, without loopback's stack.

A local proc server listens on TCP at its address (what clients, status and pickled meshes
name) and also on a unix socket in a private directory (0700) that the local backend
(:mod:`mesh_client._src.local.rundirs`) makes and passes to its procs in :data:`DIR_ENV`. The
socket's path is derived from the TCP address, ``<dir>/<host>_<port>``, so an address stays a
``(host, port)`` tuple and nothing in the contract changes. A client that knows the directory
(the controller that made it, and every proc started with it) connects to the path when it is
there and to TCP otherwise (a proc of another host or controller, a pod): :func:`open_stream`
is the default :data:`~mesh_client._src.runtime.channel.Opener` of every
:class:`~mesh_client._src.runtime.peers.Peer`.

Only the transport differs. The handshake and token check, the framing and the flood limits
(:mod:`mesh_client._src.server.accepting`, :mod:`mesh_client._src.server.dispatch`) are the same
on both listeners: a socket path is no credential, the token is.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import stat
import sys

from mesh_client._src.runtime import channel, streams

#: The private directory of the local procs' unix sockets, passed from a controller to its procs.
DIR_ENV = "PROCMESH_UNIX_DIR"
#: ``sun_path`` holds 108 bytes with the terminating NUL on Linux (104 on macOS and the BSDs);
#: a longer path cannot be bound.
MAX_PATH_BYTES = 107 if sys.platform.startswith("linux") else 103

_directory: str | None = None  # this process's; None: every link is TCP


def is_private(directory: str) -> bool:
    """Whether ``directory`` is a real directory of this user that nobody else may enter."""
    try:
        st = os.lstat(directory)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077


def use_directory(directory: str | None) -> bool:
    """Look for local procs' sockets in ``directory`` from now on (None: nowhere). A directory
    that is missing or that others may enter is not used; returns whether it is."""
    global _directory
    _directory = directory if directory and is_private(directory) else None
    return _directory is not None


def directory() -> str | None:
    """The directory this process finds local procs' sockets in, if any."""
    return _directory


def path_for(address: tuple[str, int], directory: str | None = None) -> str | None:
    """The unix socket path of the proc server at ``address``; None without a directory or
    when the path would exceed :data:`MAX_PATH_BYTES`."""
    base = directory if directory is not None else _directory
    if base is None:
        return None
    path = os.path.join(base, f"{address[0]}_{address[1]}")
    return path if len(os.fsencode(path)) <= MAX_PATH_BYTES else None


def _connect(path: str, timeout: float) -> streams.SocketStream | None:
    """A stream to the unix socket at ``path``; None if nobody listens there (no file, or a
    stale one)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    except BaseException:
        sock.close()
        raise
    return streams.SocketStream(sock)


def open_stream(address: tuple[str, int], timeout: float) -> streams.SocketStream:
    """Connect to the proc server at ``address``: over its unix socket when this host has one
    for it, else over TCP (the path is absent, or a stale file of a proc that crashed). A
    client of a mesh whose proc there has ended asks :func:`buried_for` first (peers.py)."""
    path = path_for(address)
    stream = _connect(path, timeout) if path is not None and os.path.exists(path) else None
    return stream if stream is not None else channel.open_tcp(address, timeout)


def open_unix(address: tuple[str, int], timeout: float) -> streams.SocketStream:
    """Connect to the proc server at ``address`` over its unix socket only, never TCP: how a
    link that was AF_UNIX is probed once it broke (:mod:`.relinking`). Its process died if
    nobody listens at the path, and then its TCP port is free for anyone on the host to
    bind; a probe sent there would hand its handshake to whoever did, who can relay it to a
    live proc of the same mesh (README, "On the network"). The directory is ours alone."""
    path = path_for(address)
    if path is None:
        raise ConnectionRefusedError(f"no unix socket directory for {address[0]}:{address[1]}")
    stream = _connect(path, timeout)
    if stream is None:
        raise ConnectionRefusedError(f"no proc listens at {path} any more")
    return stream


def listen(address: tuple[str, int], directory: str | None = None, backlog: int = 1024) -> socket.socket | None:
    """The unix listener of the proc server at TCP ``address`` (its socket file 0600), in
    ``directory`` or this process's; None without one. A file left at the path by a proc that
    crashed is replaced: this server holds ``address``'s TCP port, so no live one owns the path."""
    path = path_for(address, directory)
    if path is None:
        return None
    remove(address, directory)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
        os.chmod(path, 0o600)  # the directory keeps others out already; this says so twice
        listener.listen(backlog)
    except BaseException:
        listener.close()
        raise
    return listener


def remove(address: tuple[str, int], directory: str | None = None) -> None:
    """Remove the file at ``address``'s path, if there is one (a new listener's bind)."""
    path = path_for(address, directory)
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _fingerprint(token: bytes) -> bytes:
    """What a tombstone holds: which mesh's proc ended there (a hash of its token, not the
    token), so that only that mesh's clients refuse the address, and a server someone else
    starts at the port later (another mesh, a worker) is reached as before."""
    return b"procmesh tombstone " + hashlib.sha256(b"procmesh-tombstone\0" + token).hexdigest().encode() + b"\n"


def bury(address: tuple[str, int], token: bytes, directory: str | None = None) -> None:
    """Replace the socket file of the proc server at ``address``, which has ended (or is
    ending), with a tombstone: a regular file naming its mesh (:func:`_fingerprint`). Its TCP
    port is free for any user of the host to bind from now on, and a client of that mesh
    dialling it would hand whoever did a handshake to relay to a live proc of the mesh
    (README, "On the network"): :func:`buried_for` tells such a client not to. It stays until
    a new proc listens there, or the directory goes with its controller."""
    path = path_for(address, directory)
    if path is None:
        return
    temporary = f"{path}.{os.getpid()}.tomb"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, _fingerprint(token))
        finally:
            os.close(fd)
        os.replace(temporary, path)  # in one step: never a moment with no file at the path
    except OSError:  # the directory is gone (its controller ended): nobody dials from it
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def buried_for(address: tuple[str, int], token: bytes) -> bool:
    """Whether the proc at ``address`` was one of the mesh of ``token`` and has ended (its
    tombstone is at the path): a client of that mesh must not dial its TCP port."""
    path = path_for(address)
    if path is None:
        return False
    try:
        with open(path, "rb", buffering=0) as f:  # a socket file cannot be opened: False below
            return f.read(128) == _fingerprint(token)
    except OSError:
        return False


def bury_stale(address: tuple[str, int], token: bytes, directory: str | None = None) -> None:
    """Bury (:func:`bury`) the socket file at ``address``'s path if nobody listens there: the
    file of a proc that was killed, and not that of a newer proc which took its port, and the
    path with it."""
    path = path_for(address, directory)
    if path is None or not os.path.exists(path) or not stat.S_ISSOCK(os.lstat(path).st_mode):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.setblocking(False)
    try:
        probe.connect(path)  # a connect and close: a live server takes it for a probe, unlogged
    except ConnectionRefusedError:
        bury(address, token, directory)
    except OSError:  # a full backlog (a live server), or gone since
        pass
    finally:
        probe.close()


def via_socket_file(stream: streams.Stream, address: tuple[str, int]) -> bool:
    """Whether ``stream`` is connected to ``address``'s unix socket in our directory (not a
    TCP link, nor a port-forward's socketpair)."""
    sock = stream.get_extra_info("socket")
    if sock is None or sock.family != socket.AF_UNIX:
        return False
    try:
        peer = sock.getpeername()
    except OSError:  # shut down already: the path it was connected to is still in the kernel's
        return False
    path = path_for(address)
    return path is not None and peer == path


def family(stream: streams.Stream) -> socket.AddressFamily | None:
    """The address family of the socket under ``stream`` (None for an in-memory stream)."""
    sock = stream.get_extra_info("socket")
    return None if sock is None else socket.AddressFamily(sock.family)
