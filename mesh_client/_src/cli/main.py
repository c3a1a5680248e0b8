"""The ``procmesh`` command line (also ``kubectl-procmesh``, so ``kubectl procmesh ...`` works):
argument parsing with kubectl's conventions, then one of :data:`.commands.COMMANDS`.

``-n/--namespace``, ``--context`` and ``--kubeconfig`` are accepted before or after the command,
as kubectl accepts them. Errors of the Kubernetes backend are printed as ``error: ...`` with
exit status 1, like kubectl; they already say what was wrong and what to do.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

from mesh_client._src import contract
from mesh_client._src.cli import commands

DESCRIPTION = "Inspect and manage ProcMesh resources (procmesh.io/v1alpha1): meshes of proc servers."
EPILOG = """examples:
  procmesh get -o wide                 every mesh of the namespace, with shape and GPU budget
  procmesh describe trainer            procs -> pods -> nodes -> GPUs, conditions, events
  procmesh logs trainer -f             every proc's output, prefixed with its rank
  procmesh top trainer                 GPU memory of each proc against its cap
  procmesh wait trainer --timeout 5m   until Ready (or a cause that waiting cannot fix)
  procmesh grant trainer --user alice  let alice use trainer, for as long as that mesh exists
"""


def duration(text: str) -> float:
    """kubectl's ``--timeout`` values: ``90``, ``90s``, ``5m``, ``1h``."""
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        if text and text[-1] in units:
            seconds = float(text[:-1]) * units[text[-1]]
        else:
            seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds):  # 'nan' waited for ever: no deadline ever compared as passed
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (like 30s, 5m or 1h)")
    return seconds


def positive_duration(text: str) -> float:
    """A ``--timeout`` that leaves time to wait: above 0 (0 made every request fail at once, and
    wait's -5s failed as 'not Ready after -5 s')."""
    seconds = duration(text)
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a duration above 0 (like 5s)")
    return seconds


#: The options whose value is a duration.
DURATION_OPTIONS = frozenset({"--timeout"})
_NEGATIVE = re.compile(r"-[0-9.]")


def joined_durations(argv: Sequence[str]) -> list[str]:
    """``--timeout -5s`` as ``--timeout=-5s``: argparse takes '-5s' for an option and says only
    'expected one argument'; joined, :func:`positive_duration` says what is wrong with it."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] in DURATION_OPTIONS and _NEGATIVE.match(arg):
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


def lines_count(text: str) -> int:
    """``--tail``: a number of lines, 0 or more (the API server refuses a negative one per pod)."""
    try:
        lines = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of lines") from None
    if lines < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 or more lines")
    return lines


#: The resource types a MESH argument may name, as kubectl accepts them (``-o name`` prints the last).
MESH_TYPES = frozenset({contract.SHORT_NAME, contract.KIND.lower(), contract.PLURAL, commands.KIND_PREFIX,
                        commands.RESOURCE})


def mesh_name(text: str) -> str:
    """A MESH argument: ``NAME``, or ``TYPE/NAME`` as ``get -o name`` prints it (so that
    ``procmesh delete $(procmesh get -o name)`` works, as with kubectl)."""
    kind, sep, name = text.rpartition("/")
    if sep and kind.lower() not in MESH_TYPES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a ProcMesh: give its name, or {commands.KIND_PREFIX}/NAME")
    if not contract.is_object_name(name):  # an empty name addressed the collection: delete '' deleted every mesh
        raise argparse.ArgumentTypeError(f"{text!r} is not a ProcMesh name")
    return name


def namespace_name(text: str) -> str:
    """``-n``: a namespace name (one with a '/' was read as a URL path: 'no ProcMesh resource type')."""
    if text and not contract.is_object_name(text):  # '' is the context's, as with kubectl
        raise argparse.ArgumentTypeError(f"{text!r} is not a namespace name")
    return text


def _connection_flags(parser: argparse.ArgumentParser, suppress: bool) -> None:
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument("-n", "--namespace", default=default, type=namespace_name,
                        help="namespace (default: the kubeconfig context's, or the pod's)")
    parser.add_argument("--context", default=default, help="kubeconfig context to use")
    parser.add_argument("--kubeconfig", default=default,
                        help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config; in a pod, "
                             "its service account)")


class _Parser(argparse.ArgumentParser):
    """Reads a negative ``--timeout`` as its value (:func:`joined_durations`)."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        return super().parse_known_args(joined_durations(sys.argv[1:] if args is None else args), namespace)


def build_parser(prog: str = "procmesh") -> argparse.ArgumentParser:
    parser = _Parser(prog=prog, description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _connection_flags(parser, suppress=False)
    common = _Parser(add_help=False)
    _connection_flags(common, suppress=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("get", parents=[common], help="list meshes: ready/desired, phase, restarts, GPU mode",
                       description="List ProcMeshes (all of the namespace, or those named). PHASE is the "
                                   "operator's, unless its status is not current: then StatusStale or "
                                   "NotReconciled (no operator has reconciled the mesh's generation), or "
                                   "StatusBehindPods (its pods contradict it); Terminating while it is "
                                   "being deleted.")
    p.add_argument("names", nargs="*", metavar="MESH", type=mesh_name)
    p.add_argument("-o", "--output", choices=["wide", "json", "yaml", "name"],
                   help="wide: shape, GPU budget, colocation, observed/current generation")
    p.add_argument("-A", "--all-namespaces", action="store_true", help="meshes of every namespace")

    p = sub.add_parser("describe", parents=[common], help="a mesh in detail: procs, pods, nodes, GPUs, conditions",
                       description="Show a ProcMesh: its spec, conditions, a proc -> pod -> node -> GPU -> "
                                   "memory cap table with each pod's live state and last failure, and its "
                                   "events.")
    p.add_argument("names", nargs="+", metavar="MESH", type=mesh_name)

    p = sub.add_parser("logs", parents=[common], help="the procs' output, interleaved, prefixed by rank",
                       description="Print the proc servers' logs, one stream per pod (any number of procs), "
                                   "each line prefixed with its proc's rank.")
    p.add_argument("name", metavar="MESH", type=mesh_name)
    p.add_argument("--rank", type=int, action="append", help="only this rank (repeatable)")
    p.add_argument("--coords", metavar="DIM=I,...", help="only procs at these coordinates, e.g. hosts=1")
    p.add_argument("-f", "--follow", action="store_true", help="keep streaming new output")
    p.add_argument("--tail", type=lines_count, help="lines of recent output per proc")
    p.add_argument("-p", "--previous", action="store_true", help="the previous run of each proc")
    p.add_argument("--no-prefix", dest="prefix", action="store_false", help="no [rank N] prefix")

    p = sub.add_parser("top", parents=[common], help="each proc's GPU memory against its cap",
                       description="Ask every proc (over the authenticated proc wire, with the mesh's token: "
                                   "needs the mesh's access Role) for its PyTorch allocator's GPU memory, "
                                   "shown against the cap its memory fraction sets.")
    p.add_argument("name", metavar="MESH", type=mesh_name)
    p.add_argument("--via-api-server", action="store_true",
                   help="reach the procs by port-forwards through the API server (outside the pod network)")
    p.add_argument("--timeout", type=positive_duration, default=5.0, help="per proc (default 5s)")

    p = sub.add_parser("create", parents=[common], help="create meshes from a manifest",
                       description="Create the ProcMeshes of a YAML or JSON file ('-' reads stdin).")
    p.add_argument("-f", "--filename", required=True, help="manifest file, or - for stdin")

    p = sub.add_parser("delete", parents=[common], help="delete meshes (their pods go with them)",
                       description="Delete ProcMeshes; garbage collection removes their pods, Service, "
                                   "token Secret and access Role.")
    p.add_argument("names", nargs="+", metavar="MESH", type=mesh_name)
    p.add_argument("--wait", action="store_true", help="until each mesh is gone")
    p.add_argument("--timeout", type=positive_duration, default=120.0, help="for --wait, each mesh (default 2m)")

    p = sub.add_parser("grant", parents=[common], help="let a user, group or service account use a mesh",
                       description="Bind the mesh's access Role (<mesh>-procmesh-access: get the mesh and its "
                                   "token Secret, so run code in its procs) to one subject, with a RoleBinding "
                                   "owned by the mesh: it is deleted with the mesh, so it never grants a later "
                                   "mesh of the same name, as a plain 'kubectl create rolebinding' would.")
    p.add_argument("name", metavar="MESH", type=mesh_name)
    whom = p.add_mutually_exclusive_group(required=True)
    whom.add_argument("--user", help="a user name, as the API server authenticates it")
    whom.add_argument("--group", help="a group name")
    whom.add_argument("--serviceaccount", metavar="NAMESPACE:NAME", help="a service account")

    p = sub.add_parser("wait", parents=[common], help="until meshes are Ready (or deleted)",
                       description="Wait until each mesh is Ready for its current generation (fails at once "
                                   "on a cause no waiting fixes, such as a refused GPU budget), or until "
                                   "it is deleted.")
    p.add_argument("names", nargs="+", metavar="MESH", type=mesh_name)
    p.add_argument("--for", dest="wait_for", default="condition=Ready",
                   choices=["condition=Ready", "delete"], help="condition=Ready (default) or delete")
    p.add_argument("--timeout", type=positive_duration, default=600.0, help="each mesh (default 10m)")
    return parser


def kubeconfig_paths(kubeconfig: str | None, environ: Mapping[str, str]) -> list[str]:
    """The kubeconfig files the client reads, as kubectl finds them: ``--kubeconfig``, else each
    of ``$KUBECONFIG``, else ``~/.kube/config``."""
    if kubeconfig:
        return [kubeconfig]
    listed = [p for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return listed or [os.path.expanduser("~/.kube/config")]


def credentials_problem(kubeconfig: str | None, exc: Exception) -> str:
    """What failed to load, naming the files looked at and, when none exists, how to give one."""
    paths = kubeconfig_paths(kubeconfig, os.environ)
    absent = [p for p in paths if not os.path.exists(p)]
    if len(absent) == len(paths):
        return (f"no kubeconfig: looked at {', '.join(paths)} (not found); set KUBECONFIG, pass "
                f"--kubeconfig, or create ~/.kube/config (in a pod, the service account is used)")
    return f"cannot load Kubernetes credentials from {', '.join(p for p in paths if p not in absent)}: {exc}"


#: The status of a command whose output's reader went away (``procmesh logs -f | head -1``):
#: a program killed by SIGPIPE's, as kubectl's or cat's would be.
OUTPUT_CLOSED = 128 + 13


def output_closed(out: TextIO) -> int:
    """Stop quietly once nothing reads ``out``: no error line for what the user ended, and
    nothing left buffered for the interpreter to fail to flush at exit."""
    try:
        fd = out.fileno()
    except (OSError, ValueError):  # not a file (a test's StringIO)
        return OUTPUT_CLOSED
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    return OUTPUT_CLOSED


def _prog(argv0: str) -> str:
    return "kubectl procmesh" if os.path.basename(argv0).startswith("kubectl-") else "procmesh"


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run one command; returns the exit status (0 ok, 1 error, 130 interrupted, 141 output
    closed early)."""
    parser = build_parser(_prog(sys.argv[0]))
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    out = out or sys.stdout
    from mesh_client._src.kubernetes import transport

    try:
        transport.api_timeout_from(os.environ)  # a bad PROCMESH_API_TIMEOUT is no credentials problem
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        from mesh_client._src.kubernetes import api as api_mod
        from mesh_client._src.kubernetes.errors import KubernetesMeshError

        client = api_mod.make_api_client(args.kubeconfig, args.context)
        namespace = args.namespace or api_mod.default_namespace(args.kubeconfig, args.context)
        api = api_mod.KubeApi(client, namespace)
    except ImportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # no kubeconfig, no such context: the client's own words
        print(f"error: {credentials_problem(args.kubeconfig, exc)}", file=sys.stderr)
        return 1
    try:
        status = commands.COMMANDS[args.command](api, args, out)
        out.flush()  # here, so that a closed output is seen below and not at interpreter exit
        return status
    except BrokenPipeError:
        return output_closed(out)
    except (KubernetesMeshError, ValueError, OSError) as exc:
        if _flushed_into_closed(out):  # the reader went first: what it ended, not this error
            return output_closed(out)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if _flushed_into_closed(out):
            return output_closed(out)
        return 130


def _flushed_into_closed(out: TextIO) -> bool:
    """Flush what a command printed before it failed (at interpreter exit the flush would fail
    with an 'Exception ignored' traceback); whether the reader had gone."""
    try:
        out.flush()
    except BrokenPipeError:
        return True
    except (OSError, ValueError):
        pass
    return False


def entry() -> None:
    """The console script."""
    sys.exit(main())
