"""End to end on a real node: our images in containerd, the chart, the examples, failures.

Aspects, in the order a platform engineer meets them: the node is a real kubelet on containerd
2.x; the chart's operator runs as a non-root, read-only pod that reaches the API server through
the `kubernetes` Service (kube-proxy) and answers its probes and metrics; the CPU example mesh
is Ready with every proc in a container of our proc-server image; the sharing-GPUs example runs
from outside through the real kubelet's port-forward, and as an in-cluster Job on pod IPs; DDP
(spmd_train) runs in containers; a proc server killed in its container is a SupervisionError
for the caller and is restarted; a call to a proc cut off the network (its packets dropped, no
FIN or RST) fails once TCP keepalive gives up on the link, instead of waiting for ever; a mesh
with an image that is not there reports the kubelet's reason and attach fails at once; a proc
the kubelet evicts is reported with the kubelet's reason (Evicted, and why), not only its
container's exit code 137, and so is an idle one, which exits 143 on the SIGTERM (an exit 0
made its pod Succeeded, with no reason); helm uninstall leaves no operator pod and keeps the CRD.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from mesh_client._src import contract
from mesh_client.kubernetes import MeshNotReady, attach
from tests.cluster import testing
from tests.cluster.real_node import images, netns
from tests.e2e import support
from tests.e2e.support import kubectl
from tests.integration.operator.support import ROOT, condition, create_mesh, get_mesh

pytestmark = [pytest.mark.e2e, pytest.mark.cluster]

def _pods(cluster: Any, namespace: str, selector: str) -> list[dict[str, Any]]:
    out = kubectl(cluster, "-n", namespace, "get", "pods", "-l", selector, "-o", "json").stdout
    return json.loads(out)["items"]  # type: ignore[no-any-return]


def _digest(image_id: str) -> str:
    return image_id.rpartition("sha256:")[2]


@pytest.fixture(scope="module")
def gpu_labels(cluster: Any) -> None:
    """GPU Feature Discovery labels on the real node, so pinned meshes can be placed on it; the
    node has no NVIDIA runtime, so the procs run the examples' CPU path."""
    kubectl(cluster, "label", "node", support.node_name(cluster), "--overwrite", "nvidia.com/gpu.count=2",
            "nvidia.com/gpu.memory=81920", "nvidia.com/gpu.product=NVIDIA-H200")


def test_the_node_is_a_kubelet_on_containerd_2(cluster: Any) -> None:
    name = support.node_name(cluster)
    node = json.loads(kubectl(cluster, "get", "node", name, "-o", "json").stdout)
    info = node["status"]["nodeInfo"]
    # The kubelet of the control plane's release (the harness builds both from one module).
    server = json.loads(kubectl(cluster, "version", "-o", "json").stdout)["serverVersion"]["gitVersion"]
    assert info["containerRuntimeVersion"].startswith("containerd://2.")
    assert info["kubeletVersion"] == server
    wide = kubectl(cluster, "get", "node", name, "-o", "wide").stdout
    assert "containerd://2." in wide and server in wide


def test_the_operator_pod_is_non_root_read_only_and_answers_probes_and_metrics(
        cluster: Any, release: str) -> None:
    (pod,) = _pods(cluster, support.RELEASE_NAMESPACE, "app.kubernetes.io/name=procmesh-operator")
    (status,) = pod["status"]["containerStatuses"]
    # Ready comes from the kubelet's own readiness probe against the pod IP.
    assert status["ready"] and status["restartCount"] == 0
    assert _digest(status["imageID"]) == _digest(support.image("operator")["id"])
    (container,) = pod["spec"]["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    # Inside the container: an unprivileged user, the `kubernetes` Service as its API server.
    seen = kubectl(cluster, "-n", support.RELEASE_NAMESPACE, "exec", pod["metadata"]["name"], "--",
                   "python", "-c", "import os; print(os.getuid(), os.environ['KUBERNETES_SERVICE_HOST'],"
                   " os.access('/', os.W_OK))").stdout.split()
    service_ip = kubectl(cluster, "get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}").stdout
    assert seen == ["65532", service_ip, "False"]
    # Metrics through the chart's Service: ClusterIP -> kube-proxy's rules -> the pod.
    services = json.loads(kubectl(cluster, "-n", support.RELEASE_NAMESPACE, "get", "services",
                                  "-o", "json").stdout)["items"]
    metrics = next(s for s in services if any(p["port"] == 9090 for p in s["spec"]["ports"]))
    # From a pod, as any in-cluster scraper: kube-proxy writes the Service's rules within its sync
    # period of the Service's creation, so the pod tries for up to a minute.
    fetch = ("import time, urllib.request\n"
             "for attempt in range(60):\n"
             "    try:\n"
             f"        print(urllib.request.urlopen('http://{metrics['spec']['clusterIP']}:9090/metrics',"
             " timeout=5).read().decode()); break\n"
             "    except OSError as error:\n"
             "        print('not yet:', error); time.sleep(1)\n")
    text = support.run_job(cluster, support.CLIENT_NAMESPACE, "scrape-metrics",
                           support.image("proc-server")["ref"], ["python", "-c", fetch])
    assert "# TYPE" in text, text


def test_the_cpu_example_mesh_is_ready_in_our_proc_server_image(cluster: Any, namespace: str,
                                                                release: str) -> None:
    """In a namespace that enforces Pod Security "restricted": the procs run in containers
    under the runtime's default seccomp profile, without capabilities, as a non-root user."""
    kubectl(cluster, "label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    kubectl(cluster, "-n", namespace, "apply", "-f", str(ROOT / "examples" / "meshes" / "cpu-mesh.yaml"))
    kubectl(cluster, "-n", namespace, "wait", "--for=condition=Ready", "--timeout=300s", "procmesh/cpu-mesh")
    pods = _pods(cluster, namespace, "procmesh.io/mesh=cpu-mesh")
    assert len(pods) == 8
    ours = _digest(support.image("proc-server")["id"])
    for pod in pods:
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"] and _digest(status["imageID"]) == ours, status
        assert status["containerID"].startswith("containerd://")
    # What the kernel says of one proc server: user 10001, no capability, no new privileges,
    # a seccomp filter (mode 2).
    pid = support.container_pid(cluster, pods[0]["status"]["containerStatuses"][0]["containerID"])
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    assert fields["Uid"].split()[0] == "10001"
    assert int(fields["CapEff"], 16) == 0 and int(fields["CapPrm"], 16) == 0
    assert fields["NoNewPrivs"].strip() == "1" and fields["Seccomp"].strip() == "2"


def _example(cluster: Any, *args: str) -> str:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "PROCMESH_DEVICE_IDS": "0,1"}
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_sharing_gpus_from_outside_through_the_kubelets_port_forward(
        cluster: Any, namespace: str, release: str, gpu_labels: None) -> None:
    out = _example(cluster, "examples/sharing_gpus.py", "--kubernetes", "--via-api-server",
                   "--namespace", namespace, "--image", support.image("examples")["ref"])
    assert "Example completed successfully!" in out
    assert out.count("trainer + reference") == 2


def test_sharing_gpus_as_an_in_cluster_job_on_pod_ips(cluster: Any, release: str, gpu_labels: None) -> None:
    log = support.run_job(cluster, support.CLIENT_NAMESPACE, "sharing-gpus", support.image("examples")["ref"],
                          ["python", f"{images.EXAMPLES_DIR}/sharing_gpus.py", "--kubernetes",
                           "--namespace", support.CLIENT_NAMESPACE, "--image", support.image("examples")["ref"]])
    assert "Example completed successfully!" in log


def test_spmd_train_in_containers(cluster: Any, kube: Any, release: str) -> None:
    from kubernetes import client

    examples = support.image("examples")["ref"]
    # One real node: both hosts share it (spec.placement.hosts Any; by default they need two).
    create_mesh(client.CustomObjectsApi(kube), support.CLIENT_NAMESPACE, "spmd", hosts=2,
                perHost=[{"name": "gpus", "size": 2}], template={"image": examples},
                placement={"hosts": "Any"})
    # A mesh someone else made: its user is granted that mesh alone, by binding its access Role.
    support.kubectl(cluster, "-n", support.CLIENT_NAMESPACE, "create", "rolebinding", "spmd-user",
                    "--role=spmd-procmesh-access",
                    f"--serviceaccount={support.CLIENT_NAMESPACE}:{support.CLIENT_ACCOUNT}")
    log = support.run_job(cluster, support.CLIENT_NAMESPACE, "spmd-train", examples,
                          ["python", f"{images.EXAMPLES_DIR}/spmd_train.py", "--attach", "spmd",
                           "--namespace", support.CLIENT_NAMESPACE, "--steps", "12"])
    assert "trained on 4 procs: True" in log


@pytest.mark.harness_node
def test_a_proc_server_killed_in_its_container_is_a_supervision_error_and_restarts(
        cluster: Any, kube: Any, namespace: str, release: str) -> None:
    from kubernetes import client

    custom = client.CustomObjectsApi(kube)
    create_mesh(custom, namespace, "fragile", hosts=1, perHost=[{"name": "gpus", "size": 2}],
                restartPolicy="RestartProc", maxRestarts=3)
    # The caller is on the node (pod IPs route there): see test_sharing_gpus_from_outside_...
    # for the path through the API server.
    caller = support.in_netns_process(cluster, ["-m", "tests.e2e.node_client", "fragile", namespace])
    try:
        assert caller.stdout is not None
        assert caller.stdout.readline().strip() == "READY"
        (pod,) = [p for p in _pods(cluster, namespace, "procmesh.io/mesh=fragile")
                  if p["metadata"]["name"] == "fragile-1"]
        os.kill(support.container_pid(cluster, pod["status"]["containerStatuses"][0]["containerID"]),
                signal.SIGKILL)
        ended = caller.stdout.readline().strip()
    finally:
        caller.kill()
        caller.wait()
    assert ended.startswith("SUPERVISION") and "fragile-1" in ended, ended

    def restarted() -> dict[str, Any] | None:
        m = get_mesh(custom, namespace, "fragile")
        ready = condition(m, "Ready")
        fresh = ready.get("observedGeneration") == m["metadata"]["generation"]
        return m if fresh and ready.get("status") == "True" and (m["status"].get("restarts") or 0) >= 1 else None

    testing.wait_for(restarted, "fragile restarted its proc and is Ready again", timeout=300)
    (again,) = [p for p in _pods(cluster, namespace, "procmesh.io/mesh=fragile")
                if p["metadata"]["name"] == "fragile-1"]
    # A new container runs: in a new pod (the operator replaced it) or restarted in place.
    (status,) = again["status"]["containerStatuses"]
    assert again["metadata"]["uid"] != pod["metadata"]["uid"] or status["restartCount"] >= 1
    assert status["ready"] and status["containerID"] != pod["status"]["containerStatuses"][0]["containerID"]


@pytest.mark.harness_node
def test_a_call_to_a_proc_cut_off_the_network_fails_instead_of_waiting_for_ever(
        cluster: Any, kube: Any, namespace: str, release: str) -> None:
    """The proc's packets dropped both ways (as when its node powers off, or a partition): no
    FIN or RST ever comes, so only TCP keepalive can end the link, and a call in flight there
    fails as a lost proc's instead of waiting for a reply that cannot come."""
    from kubernetes import client

    create_mesh(client.CustomObjectsApi(kube), namespace, "cutoff", hosts=1,
                perHost=[{"name": "gpus", "size": 2}], restartPolicy="RestartProc", maxRestarts=3)
    # A call of 10 minutes, waited for 5: keepalive ends the link in about a minute and a half.
    caller = support.in_netns_process(cluster, ["-m", "tests.e2e.node_client", "cutoff", namespace, "600", "300"])
    rules = []
    try:
        assert caller.stdout is not None
        assert caller.stdout.readline().strip() == "READY"
        (pod,) = [p for p in _pods(cluster, namespace, "procmesh.io/mesh=cutoff")
                  if p["metadata"]["name"] == "cutoff-1"]
        ip = pod["status"]["podIP"]
        for rule in (["OUTPUT", "-d", ip, "-j", "DROP"], ["INPUT", "-s", ip, "-j", "DROP"]):
            subprocess.run([*netns.enter(cluster.netns), "iptables", "-I", *rule], check=True)
            rules.append(rule)
        ended = caller.stdout.readline().strip()
    finally:
        for rule in rules:
            subprocess.run([*netns.enter(cluster.netns), "iptables", "-D", *rule], check=False)
        caller.kill()
        caller.wait()
    assert ended.startswith("SUPERVISION") and "cutoff-1" in ended, ended
    assert "Connection timed out" in ended, ended


def test_a_missing_image_is_reported_with_the_kubelets_reason_and_attach_fails_at_once(
        cluster: Any, kube: Any, namespace: str, release: str) -> None:
    from kubernetes import client

    custom = client.CustomObjectsApi(kube)
    create_mesh(custom, namespace, "noimage", hosts=1, perHost=[{"name": "gpus", "size": 1}],
                template={"image": "docker.io/procmesh/not-built:0", "imagePullPolicy": "Never"})

    def reported() -> dict[str, Any] | None:
        m = get_mesh(custom, namespace, "noimage")
        said = json.dumps((m.get("status") or {}).get("conditions") or [])
        return m if "ErrImageNeverPull" in said else None

    testing.wait_for(reported, "the mesh's conditions name ErrImageNeverPull", timeout=120)
    # At once: the fatal path ("cannot become Ready"), not the timeout ("was not Ready after").
    with pytest.raises(MeshNotReady) as info:
        attach("noimage", namespace, api_client=kube, timeout=120)
    assert "cannot become Ready" in str(info.value) and "ErrImageNeverPull" in str(info.value)


def _fill_ephemeral_storage(cluster: Any, namespace: str, pod: str) -> None:
    """Write 50 MiB into the container's writable layer, ten times its ephemeral-storage limit:
    the kubelet's eviction manager evicts the pod at its next pass (every 10 s)."""
    kubectl(cluster, "-n", namespace, "exec", pod, "--", "python", "-c",
            "open('/tmp/fill', 'wb').write(b'x' * (50 << 20))", check=False)


@pytest.mark.harness_node
def test_a_proc_evicted_by_the_kubelet_is_reported_with_the_kubelets_reason(
        cluster: Any, kube: Any, namespace: str, release: str) -> None:
    """A pod the kubelet evicts (here: over its ephemeral-storage limit) while its proc is in a
    call is killed (exit code 137, reason Error, as after any SIGKILL): only the pod's reason and
    message (Evicted, and why) tell the user what to change. The Degraded message once the
    restarts are used up, attach's error and a lost proc's story say it."""
    from kubernetes import client

    from mesh_client._src.kubernetes import assessing

    custom = client.CustomObjectsApi(kube)
    create_mesh(custom, namespace, "evicted", hosts=1, perHost=[{"name": "gpus", "size": 2}],
                restartPolicy="RestartProc", maxRestarts=0,
                template={"resources": {"limits": {"ephemeral-storage": "5Mi"}}})
    # A call in flight on proc 1: its proc server outlives the kubelet's short grace, as a busy
    # one does. (One that stops at once exits 0, and the kubelet then calls the pod Succeeded
    # with no reason: only its Evicted Event tells.)
    caller = support.in_netns_process(cluster, ["-m", "tests.e2e.node_client", "evicted", namespace, "600", "300"])
    try:
        assert caller.stdout is not None
        assert caller.stdout.readline().strip() == "READY"
        _fill_ephemeral_storage(cluster, namespace, "evicted-1")
        ended = caller.stdout.readline().strip()
    finally:
        caller.kill()
        caller.wait()
    assert ended.startswith("SUPERVISION") and "evicted-1" in ended, ended
    why = "; pod Evicted: Pod ephemeral local storage usage exceeds the total limit of containers 5Mi."

    # The kubelet writes the container's end and the eviction in either order: the status
    # follows the pod (level-based), so the message says both once the pod does.
    def told() -> dict[str, Any] | None:
        degraded = condition(get_mesh(custom, namespace, "evicted"), "Degraded")
        said = degraded.get("reason") == "RestartLimitReached" and why in degraded["message"]
        return degraded if said and "exit code 137" in degraded["message"] else None

    degraded = testing.wait_for(told, "RestartLimitReached, saying the kubelet evicted proc 1", timeout=180)
    # The container's reason is the runtime's Error, or the kubelet's own ContainerStatusUnknown
    # (exit code 137 too, and a restart count it may raise by one) when it marks the pod terminated
    # before the runtime has reported the container's end: a race inside the kubelet. The status
    # repeats what the kubelet says either way.
    endings = [contract.pod_termination({"exitCode": 137, "reason": reason}) for reason in ("Error", contract.UNKNOWN_END)]
    assert any(degraded["message"].startswith(f"proc 1 ({end}{why}) failed") for end in endings), degraded
    with pytest.raises(MeshNotReady) as info:
        attach("evicted", namespace, api_client=kube, timeout=60)
    assert "cannot become Ready" in str(info.value) and why in str(info.value)
    (pod,) = [p for p in _pods(cluster, namespace, "procmesh.io/mesh=evicted")
              if p["metadata"]["name"] == "evicted-1"]
    story = assessing.explain_death(pod, "evicted-1")
    assert story is not None and any(f"terminated ({end}){why}; restarts: " in story for end in endings), story


@pytest.mark.harness_node
def test_an_idle_proc_evicted_by_the_kubelet_reads_as_evicted_not_completed(
        cluster: Any, kube: Any, namespace: str, release: str) -> None:
    """An idle proc server stops at once on the eviction's SIGTERM. It used to exit 0: the kubelet
    then called its pod Succeeded (exit code 0, Completed) with no reason and no DisruptionTarget
    condition, so only an Event said why. It exits 143, so the pod fails with the kubelet's
    Evicted reason and message, and the mesh's status says the kubelet evicted the proc and why."""
    from kubernetes import client

    custom = client.CustomObjectsApi(kube)
    create_mesh(custom, namespace, "idle", hosts=1, perHost=[{"name": "gpus", "size": 2}],
                restartPolicy="RestartProc", maxRestarts=0,
                template={"resources": {"limits": {"ephemeral-storage": "5Mi"}}})
    testing.wait_for(lambda: condition(get_mesh(custom, namespace, "idle"), "Ready").get("status") == "True",
                     "mesh idle Ready", timeout=180)
    _fill_ephemeral_storage(cluster, namespace, "idle-1")
    why = "; pod Evicted: Pod ephemeral local storage usage exceeds the total limit of containers 5Mi."

    def told() -> dict[str, Any] | None:
        degraded = condition(get_mesh(custom, namespace, "idle"), "Degraded")
        return degraded if degraded.get("reason") == "RestartLimitReached" and "exit code" in degraded["message"] \
            and why in degraded["message"] else None

    try:
        degraded = testing.wait_for(told, "RestartLimitReached, saying the kubelet evicted proc 1", timeout=180)
    finally:  # what the kubelet wrote, for the failure's report
        (pod,) = [p for p in _pods(cluster, namespace, "procmesh.io/mesh=idle") if p["metadata"]["name"] == "idle-1"]
        seen = {k: pod["status"].get(k) for k in ("phase", "reason", "message", "conditions", "containerStatuses")}
        print(f"evicted idle pod: {json.dumps(seen)}")
    assert pod["status"]["phase"] == "Failed" and pod["status"]["reason"] == "Evicted", seen
    # The proc's own end (143), or the kubelet's ContainerStatusUnknown (137) where it marked the
    # pod terminated before the runtime reported the container's end (see the test above).
    endings = ("exit code 143, Error", contract.pod_termination({"exitCode": 137, "reason": contract.UNKNOWN_END}))
    assert any(degraded["message"].startswith(f"proc 1 ({end}{why}) failed") for end in endings), (degraded, seen)


def test_helm_uninstall_leaves_no_operator_pod_and_keeps_the_crd(cluster: Any, release: str) -> None:
    support.helm(cluster, "uninstall", support.RELEASE, "-n", support.RELEASE_NAMESPACE, "--wait")
    testing.wait_for(lambda: not _pods(cluster, support.RELEASE_NAMESPACE, "app.kubernetes.io/name=procmesh-operator"),
                     "no operator pod left")
    assert kubectl(cluster, "get", "crd", "procmeshes.procmesh.io").returncode == 0
