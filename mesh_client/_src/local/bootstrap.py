"""How a proc is launched: ``BootstrapCommand`` and ``default_bootstrap_cmd()``, as in Monarch."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True)
class BootstrapCommand:
    """A program, its arguments and environment changes (a ``None`` value removes a variable)."""

    program: str
    arg0: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str | None] = dataclasses.field(default_factory=dict)
    inherit_env: bool = True

    def with_env(self, env: Mapping[str, str | None]) -> BootstrapCommand:
        """A copy with ``env`` merged on top of this command's env."""
        return dataclasses.replace(self, env={**self.env, **env})

    def argv(self) -> list[str]:
        return [self.arg0 or self.program, *self.args]

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """The child's environment: ``base`` (if inherited) with this command's changes."""
        out = dict(base) if self.inherit_env else {}
        for key, value in self.env.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = str(value)
        return out


def default_bootstrap_cmd() -> BootstrapCommand:
    """The command that starts procmesh's proc server with this Python."""
    return BootstrapCommand(program=sys.executable, args=("-m", "mesh_client.proc_server"))
