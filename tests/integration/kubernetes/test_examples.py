"""The examples through the operator: two pinned, colocated ProcMeshes sharing (emulated) GPUs,
created from Python or applied with kubectl and attached; DDP on a 2x2 ProcMesh."""

import ast
import os
import re
import subprocess
import sys

import pytest

from tests.integration.local.test_examples import ROOT
from tests.integration.operator.support import kubectl

pytestmark = pytest.mark.cluster


def run(cluster, *args):
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    out = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_sharing_gpus_creates_pinned_colocated_meshes(cluster, namespace, operator, gpu_node, devices_free):
    out = run(cluster, "examples/sharing_gpus.py", "--kubernetes", "--namespace", namespace)
    assert "step 2: loss=" in out and "Example completed successfully!" in out
    # each role reported its procs: the trainer's procs see the same devices as the policy's
    assert out.count("trainer + reference") == 2
    # CUDA as each proc sees it (its pod's torch and GPU), one line per proc, not the controller's
    for role in ("policy", "trainer"):
        for gpu in (0, 1):
            assert re.search(rf"^{role} proc hosts=0, gpus={gpu}: torch \S+ \(CUDA build \S+\), "
                             rf"CUDA available: (True|False), ", out, re.MULTILINE), out


def test_sharing_gpus_shares_dra_claims(cluster, namespace, operator, dra_node, devices_free):
    out = run(cluster, "examples/sharing_gpus.py", "--kubernetes", "--gpus", "dra", "--namespace", namespace)
    assert "step 2: loss=" in out and "Example completed successfully!" in out
    # the node exposed each proc's claimed device: the trainer's procs see the policy's devices
    devices = {}
    for line in out.splitlines():
        role, _, usage = line.partition(" {")
        if role in ("policy", "trainer") and usage:
            devices.setdefault(role, []).append(ast.literal_eval("{" + usage)["device"])
    assert sorted(devices["policy"]) == sorted(devices["trainer"])
    assert all(d.startswith("GPU-") for d in devices["policy"])


def test_sharing_gpus_attaches_to_applied_meshes(cluster, namespace, operator, gpu_node, devices_free):
    kubectl(cluster, "apply", "-n", namespace, "-f", str(ROOT / "examples" / "meshes" / "rl-pinned-pair.yaml"))
    out = run(cluster, "examples/sharing_gpus.py", "--attach", "--namespace", namespace)
    assert "Example completed successfully!" in out


def test_spmd_train_on_a_two_by_two_proc_mesh(cluster, namespace, operator):
    out = run(cluster, "examples/spmd_train.py", "--kubernetes", "--hosts", "2", "--namespace", namespace, "--steps", "12")
    # the workers print to their pods' logs; each checks that DDP kept the replicas equal
    assert "trained on 4 procs: True" in out
    # ... and what they print shows in the controller's output, as it does locally
    assert re.search(r"^\[\S+ rank 0\] step 0: loss \d+\.\d+ \(world size 4\)$", out, re.MULTILINE), out
