"""The ``procmesh`` commands: each fetches through :class:`~mesh_client._src.kubernetes.api.KubeApi`
and prints what :mod:`.tables` renders (or what :mod:`.logs` streams).

Rights, as the README's access model has them: ``get``/``describe``/``wait`` need ``get`` on the
mesh (its Role ``<mesh>-procmesh-access`` suffices), ``get`` without a name needs ``list``;
``logs`` needs ``pods/log``; ``top`` needs the mesh's token, which only its Role grants.
Refusals raise :class:`~mesh_client._src.kubernetes.errors.MeshAccessDenied` naming what to bind.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from mesh_client._src import contract
from mesh_client._src.cli import following, logs, manifests, tables
from mesh_client._src.kubernetes import api as api_mod
from mesh_client._src.kubernetes import (
    assessing,
    attaching,
    forwarding,
    grants,
    stale_tokens,
    transport,
)
from mesh_client._src.kubernetes.errors import (
    ApiServerUnreachable,
    KubernetesMeshError,
    MeshAccessDenied,
    MeshNotFound,
)
from mesh_client._src.runtime import identifying
from mesh_client._src.wire import errors as wire_errors

RESOURCE = f"{contract.PLURAL}.{contract.GROUP}"  # what kubectl prints: procmesh.procmesh.io
KIND_PREFIX = f"{contract.KIND.lower()}.{contract.GROUP}"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _dump(obj: Any, output: str, out: TextIO) -> None:
    if output == "json":
        out.write(json.dumps(obj, indent=4, default=str) + "\n")
    else:
        import yaml

        out.write(yaml.safe_dump(obj, sort_keys=False, default_flow_style=False))


_MISSING: tuple[type[KubernetesMeshError], ...] = (MeshNotFound, MeshAccessDenied)


def _each(names: list[str], act: Callable[[str], None],
          errors: tuple[type[KubernetesMeshError], ...] = _MISSING) -> int:
    """``act`` on every name, as kubectl does: a mesh that is missing (or refused), or whatever
    else ``errors`` names, is said on stderr and the others are still acted on; 1 when any
    failed."""
    failed = 0
    for name in names:
        try:
            act(name)
        except errors as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


# --- get ---------------------------------------------------------------------------------------

def get(api: api_mod.KubeApi, args: argparse.Namespace, out: TextIO) -> int:
    status = 0
    if args.names:
        meshes: list[dict[str, Any]] = []
        status = _each(args.names, lambda n: meshes.append(api.get_mesh(n)))
        if not meshes:
            return status
    else:
        meshes = sorted(api.list_meshes(args.all_namespaces),
                        key=lambda m: (m["metadata"].get("namespace", ""), m["metadata"]["name"]))
    if args.output in ("json", "yaml"):
        if len(args.names) == 1:
            _dump(meshes[0], args.output, out)
        else:
            _dump({"apiVersion": "v1", "kind": "List", "items": meshes,
                   "metadata": {"resourceVersion": ""}}, args.output, out)
        return status
    if args.output == "name":
        for mesh in meshes:
            out.write(f"{KIND_PREFIX}/{mesh['metadata']['name']}\n")
        return status
    if not meshes:
        where = "any namespace" if args.all_namespaces else f"{api.namespace} namespace"
        print(f"No resources found in {where}.", file=sys.stderr)
        return 0
    wide = args.output == "wide"
    header = list(tables.GET_HEADER) + (tables.GET_WIDE if wide else [])
    if args.all_namespaces:
        header.insert(0, "NAMESPACE")
    now = _now()
    grouped = tables.pods_by_mesh(api.all_mesh_pods(args.all_namespaces))

    def pods_of(mesh: dict[str, Any]) -> list[Any] | None:
        if grouped is None:
            return None
        meta = mesh["metadata"]
        return grouped.get((str(meta.get("namespace")), str(meta["name"])), [])

    rows = [tables.get_row(m, now, wide=wide, namespace=args.all_namespaces, pods=pods_of(m)) for m in meshes]
    out.write(tables.render(header, rows) + "\n")
    return status


# --- describe ----------------------------------------------------------------------------------

def describe(api: api_mod.KubeApi, args: argparse.Namespace, out: TextIO) -> int:
    shown = 0

    def one(name: str) -> None:
        nonlocal shown
        mesh = api.get_mesh(name)
        pods = api.visible_pods(name)
        events = api.events(contract.KIND, name, (mesh.get("metadata") or {}).get("uid"))
        if shown:
            out.write("\n\n")
        out.write(tables.describe_text(mesh, pods, events, _now()) + "\n")
        shown += 1

    return _each(args.names, one)


def _no_procs(api: api_mod.KubeApi, name: str, mesh: dict[str, Any], doing: str) -> KubernetesMeshError:
    """A mesh with no procs now (suspended, queued by Kueue, not reconciled yet) is an error
    that names its phase: there is nothing to show, and an empty answer would read as success."""
    return KubernetesMeshError(
        f"ProcMesh {api.namespace}/{name} has no proc pods to {doing} (phase {tables.phase(mesh)}); "
        f"'procmesh describe {name} -n {api.namespace}' says why")


# --- logs --------------------------------------------------------------------------------------

def logs_(api: api_mod.KubeApi, args: argparse.Namespace, out: TextIO) -> int:
    mesh = api.get_mesh(args.name)
    procs = contract.status_procs(mesh)
    if not procs:  # no status yet: the pods themselves, by their rank label
        procs = [{"rank": int(p["metadata"]["labels"].get(contract.RANK_LABEL, 0)),
                  "pod": p["metadata"]["name"], "coords": {}} for p in api.pods(args.name)]
    if not procs:  # nothing to select from: why there is nothing, not that the selection missed
        raise _no_procs(api, args.name, mesh, "read logs of")
    coords = logs.parse_coords(args.coords) if args.coords else None
    chosen = logs.select(procs, args.rank, coords)
    if not chosen:
        raise KubernetesMeshError(
            f"no proc of ProcMesh {api.namespace}/{args.name} matches --rank {args.rank or '*'} "
            f"--coords {args.coords or '*'}; 'procmesh describe {args.name} -n {api.namespace}' lists its procs")

    def opener(pod: str) -> Callable[[], Any]:
        return lambda: api.pod_log(pod, follow=args.follow, tail=args.tail, previous=args.previous)

    def restarted(pod: str) -> Any:  # the whole log of a proc's new pod
        return api.pod_log(pod, follow=True)

    streams: list[tuple[str, Callable[[], Any], logs.Reopen | None]] = []
    for proc in chosen:
        prefix, pod = f"[rank {proc['rank']}] " if args.prefix else "", str(proc["pod"])
        if args.follow:
            follower = following.ProcFollower(api, mesh, int(proc["rank"]), pod, restarted)
            streams.append((prefix, follower.first(opener(pod)), follower))
        else:
            streams.append((prefix, opener(pod), None))
    errors = logs.follow_all(streams, out)
    for error in dict.fromkeys(errors):  # -p of procs that never restarted: one line, not one per proc
        print(f"error: {error}", file=sys.stderr)
    # Any proc left out fails the command, as kubectl logs -l does: the output is partial, and a
    # script reading it can only tell by the status.
    return 1 if errors else 0


# --- top ---------------------------------------------------------------------------------------

def top(api: api_mod.KubeApi, args: argparse.Namespace, out: TextIO) -> int:
    """Each proc's GPU memory, asked from the proc itself over the authenticated wire (the
    operator never connects to procs, so no status holds this)."""
    mesh = api.get_mesh(args.name)
    procs = sorted(contract.status_procs(mesh), key=lambda p: p["rank"])
    if not procs:  # as logs says it: 'No procs.' with status 0 read as a mesh with nothing in use
        raise _no_procs(api, args.name, mesh, "ask for their GPU memory")
    token = api.read_token(args.name, api_mod.token_secret_name(mesh))
    opener = None
    if args.via_api_server:
        pods = {_address(p): str(p["pod"]) for p in procs if p.get("address")}
        opener = forwarding.port_forward_opener(api.api_client, api.namespace, pods)

    def ask(proc: dict[str, Any]) -> tuple[identifying.IdentityReply | None, str | None]:
        if not proc.get("address"):
            return None, "no address (not running)"
        try:
            return identifying.identify_proc(_address(proc), token, timeout=args.timeout, opener=opener), None
        except wire_errors.TokenRefused as exc:  # a row, and once below what it means
            refusals.append((int(proc["rank"]), stale_tokens.refused(
                api.namespace, args.name, f"rank {proc['rank']} (pod {proc.get('pod')})", api_mod.token_secret_name(mesh), exc)))
            return None, f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # one proc's failure is a row, not the end of the table
            return None, f"{type(exc).__name__}: {exc}"

    refusals: list[tuple[int, str]] = []  # (rank, what its refusal means)

    with concurrent.futures.ThreadPoolExecutor(max_workers=min(32, max(1, len(procs)))) as pool:
        answers = list(pool.map(ask, procs))
    rows = [tables.top_row(p, d, e) for p, (d, e) in zip(procs, answers)]
    out.write(tables.render(tables.TOP_HEADER, rows) + "\n")
    if refusals:
        print(f"error: {min(refusals)[1]}", file=sys.stderr)
    if all(error is not None for _, error in answers):  # a table of failures is no answer
        print(f"error: no proc of ProcMesh {api.namespace}/{args.name} answered (each row says why)",
              file=sys.stderr)
        return 1
    return 0


def _address(proc: dict[str, Any]) -> tuple[str, int]:
    host, _, port = str(proc["address"]).rpartition(":")
    return host.strip("[]"), int(port)


# --- grant -------------------------------------------------------------------------------------

def grant(api: api_mod.KubeApi, args: argparse.Namespace, out: TextIO) -> int:
    """Bind the mesh's access Role to one subject, the binding owned by the mesh so that it goes
    with it (:mod:`mesh_client._src.kubernetes.grants` says why)."""
    found = next(((k, getattr(args, k)) for k in grants.KINDS if getattr(args, k)), None)
    if found is None:  # --user "" and the like
        raise ValueError("give a non-empty --user, --group or --serviceaccount to grant the mesh to")
    kind, name = found
    mesh = api.get_mesh(args.name)
    deleting = assessing.deletion(mesh)
    if deleting is not None:  # the binding would go with it, and give its token meanwhile
        raise KubernetesMeshError(f"ProcMesh {api.namespace}/{args.name}: {deleting}; a grant of it would "
                                  f"go with it: grant the mesh made after it instead")
    binding = grants.render(mesh, kind, name)
    created = api.create_grant(mesh, binding)
    out.write(f"rolebinding.rbac.authorization.k8s.io/{binding['metadata']['name']} "
              f"{'created' if created else 'unchanged'}: {kind} {name} may get ProcMesh {api.namespace}/{args.name} "
              f"and its token (run code in its procs) until that mesh is deleted\n")
    return 0


# --- create / delete / wait --------------------------------------------------------------------

def create(api: api_mod.KubeApi, args: argparse.Namespace, out: TextIO) -> int:
    """Every ProcMesh of the file, all checked before the first is created; one that the API
    server refuses is said (naming the file) and the others are still created, as kubectl does."""
    where = manifests.source_name(args.filename)
    try:
        text = sys.stdin.read() if args.filename == "-" else open(args.filename).read()
    except OSError as exc:
        raise manifests.ManifestError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise manifests.ManifestError(f"{where}: not a text file (a manifest is YAML or JSON)") from None
    docs = manifests.procmeshes(text, args.filename)
    manifests.check_namespace(docs, args.namespace, args.filename)
    failed = 0
    for doc in docs:
        namespace = (doc.get("metadata") or {}).get("namespace")
        target = api if namespace in (None, api.namespace) else api_mod.KubeApi(api.api_client, namespace)
        try:
            created = target.create_mesh(doc)
        except KubernetesMeshError as exc:
            print(f"error: {where}: {exc}", file=sys.stderr)
            failed += 1
            continue
        out.write(f"{KIND_PREFIX}/{created['metadata']['name']} created\n")
    return 1 if failed else 0


def delete(api: api_mod.KubeApi, args: argparse.Namespace, out: TextIO) -> int:
    deleted: list[str] = []

    def one(name: str) -> None:
        try:
            api.get_mesh(name)  # a missing mesh is an error, as in kubectl
        except MeshAccessDenied as exc:  # its Role alone would not do: say so now, not next time
            raise MeshAccessDenied(
                f"{exc}. Deleting it takes 'delete' on procmeshes in namespace {api.namespace} as "
                f"well, which that Role does not grant (the Helm chart's client role does: "
                f"rbac.clientRole.create=true, bound by rbac.clientRole.bindings to this client's user, group or "
                f"service account)") from None
        api.delete_mesh(name)
        out.write(f'{KIND_PREFIX} "{name}" deleted\n')
        deleted.append(name)

    status = _each(args.names, one)
    if args.wait:  # each gets the whole timeout, and one still there does not hide the others
        waited = _each(deleted, lambda name: _wait_deleted(api, name, args.timeout),
                       (KubernetesMeshError,))
        status = status or waited
    return status


def wait(api: api_mod.KubeApi, args: argparse.Namespace, out: TextIO) -> int:
    def one(name: str) -> None:
        if args.wait_for == "delete":
            _wait_deleted(api, name, args.timeout)
        else:
            attaching.wait_ready(api, name, args.timeout, progress=False)
            out.write(f"{KIND_PREFIX}/{name} condition met\n")

    # As kubectl wait: each mesh gets the whole timeout, and one that fails (or times out) is
    # said without hiding the verdict on the others.
    return _each(args.names, one, (KubernetesMeshError,))


def _wait_deleted(api: api_mod.KubeApi, name: str, timeout: float) -> None:
    """Until the mesh is gone; an API server out of reach meanwhile is asked again (as
    ``wait --for condition=Ready`` does) until the timeout, then said. At the timeout, what
    holds the mesh: its finalizers, or that nothing deleted it."""
    deadline = time.monotonic() + timeout
    mesh: dict[str, Any] | None = None
    while True:
        try:
            mesh = api.get_mesh(name, timeout=transport.time_left(deadline))
        except MeshNotFound:
            return
        except ApiServerUnreachable:
            if time.monotonic() >= deadline:
                raise
        if time.monotonic() >= deadline:
            why = (assessing.deletion(mesh) if mesh is not None else None) or \
                f"it is not being deleted ('procmesh delete {name} -n {api.namespace}' deletes it)"
            raise KubernetesMeshError(
                f"ProcMesh {api.namespace}/{name} still exists after {timeout:.0f} s: {why}")
        time.sleep(0.2)


COMMANDS: dict[str, Callable[[api_mod.KubeApi, argparse.Namespace, TextIO], int]] = {
    "get": get, "describe": describe, "logs": logs_, "top": top, "create": create,
    "delete": delete, "wait": wait, "grant": grant,
}
