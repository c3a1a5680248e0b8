"""Helpers for the operator's integration tests: kubectl, the CRD (with the admission policy that
goes with it) and the operator subprocess (the one helper for them, also used by tests/gpu and
benchmarks/), mesh manifests, level-based
waits on conditions, the client's authenticated IDENTIFY request. Fixtures are in fixtures.py next to this file.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

from mesh_client._src import contract
from tests.cluster import controlplane, testing

ROOT = pathlib.Path(__file__).resolve().parents[3]
GPU_NODE = "gpu-node"
DRA_NODE = "dra-node"  # GPUs through the emulated NVIDIA DRA driver only


def kubectl(cluster: controlplane.Cluster, *args: str, input: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["kubectl", "--kubeconfig", str(cluster.kubeconfig), *args],
                            input=input, capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
    return result


CRD_NAME = f"{contract.PLURAL}.{contract.GROUP}"


def install_crd(kubeconfig: pathlib.Path) -> None:
    """Create (or update) the ProcMesh CRD and wait until it is Established. Through the API,
    not kubectl, so it works where only the cluster binaries are (the device machine)."""
    import yaml
    from kubernetes import client, config

    body = yaml.safe_load((ROOT / "crds" / "procmesh.yaml").read_text())
    with config.new_client_from_config(str(kubeconfig)) as api:
        ext = client.ApiextensionsV1Api(api)
        try:
            ext.create_custom_resource_definition(body)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
            body["metadata"]["resourceVersion"] = \
                ext.read_custom_resource_definition(CRD_NAME).metadata.resource_version
            ext.replace_custom_resource_definition(CRD_NAME, body)

        def established() -> bool:
            conditions = ext.read_custom_resource_definition(CRD_NAME).status.conditions or []
            return any(c.type == "Established" and c.status == "True" for c in conditions)

        testing.wait_for(established, "the ProcMesh CRD Established")
    install_queue_label_policy(kubeconfig)


QUEUE_LABEL_POLICY = ROOT / "crds" / "procmesh-queue-label.yaml"


def install_queue_label_policy(kubeconfig: pathlib.Path) -> None:
    """Create (or update) the admission policy that keeps a ProcMesh's Kueue queue label fixed
    (crds/procmesh-queue-label.yaml, which the chart ships too), as the CRD is applied."""
    import yaml
    from kubernetes import client, config

    items = yaml.safe_load(QUEUE_LABEL_POLICY.read_text())["items"]
    with config.new_client_from_config(str(kubeconfig)) as api:
        admission = client.AdmissionregistrationV1Api(api)
        calls = {"ValidatingAdmissionPolicy": (admission.create_validating_admission_policy,
                                               admission.read_validating_admission_policy,
                                               admission.replace_validating_admission_policy),
                 "ValidatingAdmissionPolicyBinding": (admission.create_validating_admission_policy_binding,
                                                      admission.read_validating_admission_policy_binding,
                                                      admission.replace_validating_admission_policy_binding)}
        for body in items:
            create, read, replace = calls[body["kind"]]
            try:
                create(body)
            except client.ApiException as exc:
                if exc.status != 409:
                    raise
                body["metadata"]["resourceVersion"] = read(body["metadata"]["name"]).metadata.resource_version
                replace(body["metadata"]["name"], body)


@contextlib.contextmanager
def operator_with_crd(kubeconfig: pathlib.Path, folder: pathlib.Path,
                      *extra: str) -> Iterator[OperatorProcess]:
    """The CRD installed and the operator running (``extra``: its command-line arguments);
    the operator is stopped on exit, the CRD left in place."""
    install_crd(kubeconfig)
    operator = OperatorProcess(kubeconfig, folder)
    operator.start(*extra)
    try:
        yield operator
    finally:
        operator.stop()


class OperatorProcess:
    """The operator as a subprocess; stop/start/kill like a pod would be."""

    def __init__(self, kubeconfig: pathlib.Path, folder: pathlib.Path) -> None:
        self.kubeconfig = kubeconfig
        self.folder = folder
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0
        self.metrics_port = controlplane.free_port()
        self.liveness_port = controlplane.free_port()

    @property
    def log(self) -> pathlib.Path:
        return self.folder / f"operator-{self.runs}.log"

    def start(self, *extra: str, namespaces: Sequence[str] = (), standalone: bool = True) -> None:
        """Start (again), with extra command-line arguments for this run only; watching only
        ``namespaces`` when given, else all; ``standalone=False`` leaves ``--standalone`` out
        (kopf peering, named in ``extra``)."""
        self.runs += 1
        scope = [f"--namespace={n}" for n in namespaces] or ["--all-namespaces"]
        if standalone:
            scope.append("--standalone")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "operator"),
                                             env.get("PYTHONPATH", "")])
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "procmesh_operator", *scope,
                 "--kubeconfig", str(self.kubeconfig),
                 "--liveness", f"http://127.0.0.1:{self.liveness_port}/healthz",
                 "--metrics-port", str(self.metrics_port), "--log-format", "json", *extra],
                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))
        testing.wait_for(self.healthy, "operator liveness endpoint")

    def healthy(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, self.log.read_text()[-3000:]
        with urllib.request.urlopen(f"http://127.0.0.1:{self.liveness_port}/healthz",
                                    timeout=2) as r:
            return r.status == 200

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=5) as r:
            return r.read().decode()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


@contextlib.contextmanager
def session_operator_stopped(operator: OperatorProcess) -> Iterator[None]:
    """The session's operator stopped for the block, then started again as the fixture did."""
    operator.stop()
    try:
        yield
    finally:
        operator.stop()  # a crashed run: only forgets it
        operator.start()


@contextlib.contextmanager
def session_operator_with(operator: OperatorProcess, *extra: str) -> Iterator[OperatorProcess]:
    """The session's operator restarted with extra arguments for the block, then as before."""
    with session_operator_stopped(operator):
        operator.start(*extra)
        yield operator


# --- Helpers ---------------------------------------------------------------------------------

def mesh_manifest(name: str, **spec: Any) -> dict[str, Any]:
    spec.setdefault("perHost", [{"name": "procs", "size": 2}])
    return {"apiVersion": contract.API_VERSION, "kind": contract.KIND,
            "metadata": {"name": name}, "spec": spec}


def create_mesh(custom: Any, namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    return custom.create_namespaced_custom_object(
        contract.GROUP, contract.VERSION, namespace, contract.PLURAL, mesh_manifest(name, **spec))


def get_mesh(custom: Any, namespace: str, name: str) -> dict[str, Any]:
    return custom.get_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace,
                                               contract.PLURAL, name)


def mesh_gone(custom: Any, namespace: str, name: str) -> bool:
    """Whether ProcMesh ``name`` no longer exists (a 404; any other refusal is not "gone")."""
    from kubernetes import client

    try:
        get_mesh(custom, namespace, name)
    except client.ApiException as exc:
        return bool(exc.status == 404)
    return False


def patch_mesh(custom: Any, namespace: str, name: str, spec: dict[str, Any]) -> None:
    custom.patch_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace,
                                          contract.PLURAL, name, {"spec": spec})


def condition(mesh: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in (mesh.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return c
    return {}


def wait_condition(custom: Any, namespace: str, name: str, type_: str, status: str,
                   reason: str | None = None) -> dict[str, Any]:
    """Wait until the condition holds for the mesh's current generation; return the mesh."""
    def check() -> dict[str, Any] | None:
        mesh = get_mesh(custom, namespace, name)
        c = condition(mesh, type_)
        ok = (c.get("status") == status and (reason is None or c.get("reason") == reason)
              and c.get("observedGeneration") == mesh["metadata"]["generation"])
        return mesh if ok else None
    return testing.wait_for(check, f"{namespace}/{name} {type_}={status} {reason or ''}")


def wait_ready(custom: Any, namespace: str, name: str) -> dict[str, Any]:
    return wait_condition(custom, namespace, name, "Ready", "True")


def mesh_pods(core: Any, namespace: str, name: str) -> list[Any]:
    return core.list_namespaced_pod(namespace, label_selector=contract.mesh_label_selector(name)).items


def edit_node(core: Any, name: str, change: Any, what: str) -> None:
    """``change(node)`` on the Node ``name`` and replace it, retried on a conflict with the
    node's own status updates (a read-modify-replace); ``what`` names it in a timeout."""
    from kubernetes.client.exceptions import ApiException

    def done() -> bool:
        node = core.read_node(name)
        change(node)
        try:
            core.replace_node(name, node)
        except ApiException as e:
            if e.status == 409:
                return False
            raise
        return True

    testing.wait_for(done, what)


def with_taint(node: Any, key: str, present: bool) -> None:
    """Give ``node`` (a client Node) the NoSchedule taint ``key``, or take it off."""
    others = [t for t in node.spec.taints or [] if t.key != key]
    node.spec.taints = others + ([{"key": key, "value": "yes", "effect": "NoSchedule"}] if present else [])


def nodes_of(mesh: dict[str, Any]) -> set[str]:
    """The nodes a mesh's status says its procs run on."""
    return {p["node"] for p in mesh["status"]["procs"]}


def token_secret(core: Any, namespace: str, name: str) -> str:
    """The name of mesh ``name``'s token Secret, as its body says: spec.tokenSecretName, else
    the operator's generated one in status.tokenSecretName (waited for: it is recorded at the
    mesh's first reconcile)."""
    from kubernetes import client

    custom = client.CustomObjectsApi(core.api_client)

    def named() -> str | None:
        body = get_mesh(custom, namespace, name)
        spec, status = body.get("spec") or {}, body.get("status") or {}
        recorded = status.get(contract.TOKEN_SECRET_STATUS_FIELD)
        if not spec.get("tokenSecretName") and not recorded:
            return None
        return contract.token_secret_name(name, spec.get("tokenSecretName"), recorded)

    return str(testing.wait_for(named, f"the token Secret of {name} recorded"))


def token(core: Any, namespace: str, name: str) -> bytes:
    secret = core.read_namespaced_secret(token_secret(core, namespace, name), namespace)
    return base64.b64decode(secret.data[contract.TOKEN_KEY])


def identify(address: str, token_: bytes) -> dict[str, Any]:
    """The proc server's identity (pid, GPU, mesh, rank), asked with the client's IDENTIFY request."""
    from mesh_client._src.runtime import identifying

    host, _, port = address.rpartition(":")
    return identifying.identify_proc((host, int(port)), token_)


def events(core: Any, namespace: str, name: str) -> list[Any]:
    return [e for e in core.list_namespaced_event(namespace).items
            if e.involved_object.kind == "ProcMesh" and e.involved_object.name == name]


def env_of(pod: Any) -> dict[str, str]:
    return {e.name: e.value for e in pod.spec.containers[0].env if e.value is not None}


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, default=str)


def kill_proc(address: str, token_: bytes) -> None:
    """Kill the proc server behind ``address`` (its pid, from its identity)."""
    os.kill(identify(address, token_)["pid"], signal.SIGKILL)


def owned_by(pod: Any, mesh: dict[str, Any]) -> bool:
    return any(o.uid == mesh["metadata"]["uid"] for o in pod.metadata.owner_references or [])
