"""The proc server's settings, read from ``PROCMESH_*`` environment variables (pure, testable)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

from mesh_client._src.wire import protocol

DEFAULT_PORT = 26600
DEFAULT_MAX_UNAUTHENTICATED = 256
DEFAULT_HANDSHAKE_TIMEOUT_SECONDS = 10.0


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names the variable and the fix."""


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    host: str
    port: int
    token: bytes
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


def from_env(env: Mapping[str, str]) -> ServerConfig:
    """Build the settings; raise ConfigError with the variable's name on bad input."""
    token = _token(env)
    port = _int(env, "PROCMESH_PORT", DEFAULT_PORT)
    if not 0 <= port <= 65535:
        raise ConfigError(f"PROCMESH_PORT={port} is not a TCP port (0 picks a free one)")
    fraction = env.get("PROCMESH_MEMORY_FRACTION")
    memory_fraction = None
    if fraction:
        try:
            memory_fraction = float(fraction)
        except ValueError:
            raise ConfigError(f"PROCMESH_MEMORY_FRACTION={fraction!r} is not a number") from None
        if not 0 < memory_fraction <= 1:
            raise ConfigError(f"PROCMESH_MEMORY_FRACTION={fraction} must be in (0, 1]")
    coords_text = env.get("PROCMESH_COORDS", "")
    try:
        coords = json.loads(coords_text) if coords_text else {}
    except json.JSONDecodeError:
        raise ConfigError(f"PROCMESH_COORDS={coords_text!r} is not a JSON object") from None
    max_unauthenticated = _int(env, "PROCMESH_MAX_UNAUTHENTICATED", DEFAULT_MAX_UNAUTHENTICATED)
    if max_unauthenticated < 1:
        raise ConfigError(
            f"PROCMESH_MAX_UNAUTHENTICATED={max_unauthenticated} must be at least 1, or no client could connect"
        )
    timeout_text = env.get("PROCMESH_HANDSHAKE_TIMEOUT_SECONDS")
    handshake_timeout = DEFAULT_HANDSHAKE_TIMEOUT_SECONDS
    if timeout_text:
        try:
            handshake_timeout = float(timeout_text)
        except ValueError:
            raise ConfigError(f"PROCMESH_HANDSHAKE_TIMEOUT_SECONDS={timeout_text!r} is not a number") from None
        if not handshake_timeout > 0:
            raise ConfigError(f"PROCMESH_HANDSHAKE_TIMEOUT_SECONDS={timeout_text} must be positive")
    ready = env.get("PROCMESH_READY_FD")
    path = env.get("PROCMESH_SYS_PATH")
    return ServerConfig(
        host=env.get("PROCMESH_LISTEN_HOST", "127.0.0.1"),
        port=port,
        token=token,
        mesh=env.get("PROCMESH_MESH", ""),
        rank=_int(env, "PROCMESH_RANK", 0),
        coords=coords,
        ready_fd=int(ready) if ready else None,
        lifeline=env.get("PROCMESH_LIFELINE") == "stdin",
        memory_fraction=memory_fraction,
        sys_path=tuple(json.loads(path)) if path else (),
        max_message_bytes=_int(env, "PROCMESH_MAX_MESSAGE_BYTES", protocol.DEFAULT_MAX_MESSAGE_BYTES),
        max_unauthenticated=max_unauthenticated,
        handshake_timeout=handshake_timeout,
    )


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(name)
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not an integer") from None


def _token(env: Mapping[str, str]) -> bytes:
    if env.get("PROCMESH_TOKEN"):
        return env["PROCMESH_TOKEN"].encode()
    path = env.get("PROCMESH_TOKEN_FILE")
    if path:
        try:
            with open(path, "rb") as f:
                token = f.read().strip()
        except OSError as exc:
            raise ConfigError(f"PROCMESH_TOKEN_FILE={path}: cannot read the mesh token: {exc}") from None
        if token:
            return token
        raise ConfigError(f"PROCMESH_TOKEN_FILE={path} is empty")
    raise ConfigError(
        "no mesh token: set PROCMESH_TOKEN or PROCMESH_TOKEN_FILE; the proc server never accepts "
        "unauthenticated connections"
    )
