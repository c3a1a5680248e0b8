"""The proc server's settings, read from ``PROCMESH_*`` environment variables (pure, testable).

The variables themselves are the contract's (:mod:`mesh_client._src.contract`); this module adds
what only the server needs: reading the token file and the defaults of its own bounds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TypeVar

from mesh_client._src import contract
from mesh_client._src.runtime import unixlinks
from mesh_client._src.wire import binding, protocol

DEFAULT_MAX_UNAUTHENTICATED = 256
DEFAULT_HANDSHAKE_TIMEOUT_SECONDS = 10.0


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names the variable and the fix."""


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    host: str
    port: int
    token: bytes = dataclasses.field(repr=False)  # a repr may reach a log
    mesh: str = ""
    rank: int = 0
    coords: dict[str, int] = dataclasses.field(default_factory=dict)
    ready_fd: int | None = None
    lifeline: bool = False
    memory_fraction: float | None = None
    sys_path: tuple[str, ...] = ()
    max_message_bytes: int = protocol.DEFAULT_MAX_MESSAGE_BYTES
    # The pre-authentication budget: connections still in the handshake, and their deadline.
    max_unauthenticated: int = DEFAULT_MAX_UNAUTHENTICATED
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT_SECONDS
    # The exit status when stopped by SIGTERM (contract.SIGTERM_EXIT; a pod's: 143).
    sigterm_exit: int = 0
    # Local procs only: the private directory of this host's unix links (runtime/unixlinks.py).
    unix_dir: str | None = None
    # Which run of this proc (contract.INCARNATION); None: the server draws one.
    incarnation: str | None = None


def from_env(env: Mapping[str, str]) -> ServerConfig:
    """Build the settings; raise ConfigError with the variable's name on bad input.

    The variables are parsed by :func:`mesh_client._src.contract.parse_proc_env`, the same
    contract the operator renders pods with; here the token is read and defaults applied.
    """
    try:
        proc = contract.parse_proc_env(env)
    except contract.ContractError as exc:
        raise ConfigError(str(exc)) from None
    if proc.incarnation is not None:
        try:
            binding.check_incarnation(proc.incarnation)
        except ValueError as exc:
            raise ConfigError(f"{contract.INCARNATION}: {exc}") from None
    return ServerConfig(
        host=proc.listen_host or "127.0.0.1",
        port=proc.port,
        token=_token(proc),
        mesh=proc.mesh,
        rank=proc.rank,
        coords=dict(proc.coords),
        ready_fd=proc.ready_fd,
        lifeline=proc.lifeline,
        memory_fraction=proc.memory_fraction,
        sys_path=proc.sys_path,
        max_message_bytes=_or(proc.max_message_bytes, protocol.DEFAULT_MAX_MESSAGE_BYTES),
        max_unauthenticated=_or(proc.max_unauthenticated, DEFAULT_MAX_UNAUTHENTICATED),
        handshake_timeout=_or(proc.handshake_timeout_seconds, DEFAULT_HANDSHAKE_TIMEOUT_SECONDS),
        sigterm_exit=proc.sigterm_exit,
        unix_dir=env.get(unixlinks.DIR_ENV) or None,
        incarnation=proc.incarnation,
    )


_T = TypeVar("_T")


def _or(value: _T | None, default: _T) -> _T:
    return default if value is None else value


def _token(proc: contract.ProcEnv) -> bytes:
    if proc.token:
        return proc.token.encode()
    path = proc.token_file
    if path:
        try:
            with open(path, "rb") as f:
                token = f.read().strip()
        except OSError as exc:
            raise ConfigError(f"{contract.TOKEN_FILE}={path}: cannot read the mesh token: {exc}") from None
        if token:
            return token
        raise ConfigError(f"{contract.TOKEN_FILE}={path} is empty")
    raise ConfigError(
        f"no mesh token: set {contract.TOKEN} or {contract.TOKEN_FILE}; the proc server never accepts "
        "unauthenticated connections"
    )
