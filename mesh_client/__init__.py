"""procmesh's client: Monarch-style actors on proc meshes, locally and on Kubernetes.

Port a Monarch program by changing ``from monarch.actor import ...`` to
``from mesh_client import ...``.
"""

from mesh_client._src.actor.actor import Actor
from mesh_client._src.actor.actor_mesh import ActorEndpoint, ActorMesh, as_endpoint
from mesh_client._src.actor.context import (
    ActorInstance,
    Context,
    context,
    current_actor_name,
    current_rank,
    current_size,
)
from mesh_client._src.actor.endpoint import Endpoint, concurrent_endpoint, endpoint
from mesh_client._src.actor.errors import (
    ActorError,
    ConnectionBroken,
    NotAnEndpoint,
    RemoteException,
    SupervisionError,
)
from mesh_client._src.actor.options import config, options
from mesh_client._src.actor.ports import Channel, Port, PortReceiver
from mesh_client._src.actor.proc_mesh import ProcMesh
from mesh_client._src.actor.sending import Accumulator, send
from mesh_client._src.actor.shape import EmptySliceError, Extent, Point, Shape
from mesh_client._src.actor.shutting_down import shutdown_context
from mesh_client._src.actor.supervision import MeshFailure, unhandled_fault_hook
from mesh_client._src.actor.uids import ProcId, Uid
from mesh_client._src.actor.unavailable import attach, debug_controller
from mesh_client._src.actor.value_mesh import ValueMesh
from mesh_client._src.local.bootstrap import BootstrapCommand, default_bootstrap_cmd
from mesh_client._src.local.host_mesh import HostMesh, get_or_spawn_controller, this_host, this_proc
from mesh_client._src.local.launcher import ProcStartError
from mesh_client._src.local.workers import (
    attach_to_workers,
    run_worker_loop_forever,
    run_worker_loop_until_shutdown,
    start_worker_loop_forever,
)
from mesh_client._src.runtime.deferring import returns_future
from mesh_client._src.runtime.futures import Future
from mesh_client._src.runtime.transports import ChannelTransport, enable_transport
from mesh_client._src.server.telemetry import get_meter, span, traced
from mesh_client._src.wire.errors import MessageTooLarge, VersionMismatch, WrongProc

__all__ = [
    "Accumulator",
    "Actor",
    "ActorEndpoint",
    "ActorError",
    "ActorInstance",
    "ActorMesh",
    "BootstrapCommand",
    "Channel",
    "ChannelTransport",
    "ConnectionBroken",
    "Context",
    "EmptySliceError",
    "Endpoint",
    "Extent",
    "Future",
    "HostMesh",
    "MeshFailure",
    "NotAnEndpoint",
    "Point",
    "Port",
    "PortReceiver",
    "ProcId",
    "ProcMesh",
    "ProcStartError",
    "RemoteException",
    "Shape",
    "SupervisionError",
    "Uid",
    "ValueMesh",
    "MessageTooLarge",
    "VersionMismatch",
    "WrongProc",
    "as_endpoint",
    "attach",
    "attach_to_workers",
    "concurrent_endpoint",
    "config",
    "context",
    "current_actor_name",
    "current_rank",
    "current_size",
    "debug_controller",
    "default_bootstrap_cmd",
    "enable_transport",
    "endpoint",
    "get_meter",
    "get_or_spawn_controller",
    "options",
    "returns_future",
    "run_worker_loop_forever",
    "run_worker_loop_until_shutdown",
    "send",
    "shutdown_context",
    "span",
    "start_worker_loop_forever",
    "this_host",
    "this_proc",
    "traced",
    "unhandled_fault_hook",
]
