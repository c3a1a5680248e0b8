"""Names of Monarch's actor API that have no equivalent in procmesh: importable, so a ported
program loads, and raising ``NotImplementedError`` at use with what to do instead (README,
"Deliberate differences")."""

from __future__ import annotations

from typing import NoReturn


def debug_controller() -> NoReturn:
    """Monarch's pdb-over-actors console (``breakpoint()`` in an actor, attached from the client)."""
    raise NotImplementedError(
        "procmesh has no remote debugger (Monarch's debug_controller): a breakpoint() in a proc has no terminal. "
        "Debug the actor's code in this process instead (this_proc().spawn(...) runs the actor here), or start a "
        "remote debugger in the proc yourself (debugpy.listen or remote-pdb in a bootstrap)")


def attach(addr: str) -> NoReturn:
    """Monarch's gateway attachment of the client to a remote duplex server."""
    raise NotImplementedError(
        f"attach({addr!r}): procmesh's client dials every proc itself and has no gateway to attach through. "
        "For procs in a Kubernetes cluster that this machine cannot reach, use "
        "mesh_client.kubernetes.attach(name, via_api_server=True), which tunnels through the API server")


def tensor_engine(what: str) -> NoReturn:
    """A name of Monarch's tensor engine (distributed tensors driven from the controller)."""
    raise NotImplementedError(
        f"{what} belongs to Monarch's tensor engine (distributed tensors driven from the controller), which "
        "procmesh does not have. Run the tensor code inside actors instead: an endpoint computes with torch in its "
        "proc, current_rank() gives its coordinates, and setup_torch_elastic_env (mesh_client.spmd) sets up "
        "torch.distributed collectives across the procs")
