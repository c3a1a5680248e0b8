"""Sharing GPUs between actors: the "Sharing GPUs Between Actors" program on procmesh.

A policy and a trainer, each a proc mesh with one proc per GPU in DEVICE_IDS, pinned with
``bootstrap_command`` and capped with a memory-fraction ``bootstrap``: they share the GPUs
concurrently, then take turns, and a frozen reference model is co-located in the trainer's procs.

Runs as written on a machine with GPUs 0 and 1 (set PROCMESH_DEVICE_IDS=0 for one GPU). Without
CUDA it says so and runs the same steps on the CPU, so CI exercises it.

    python examples/sharing_gpus.py                                  # local procs
    python examples/sharing_gpus.py --kubernetes [--namespace NS]    # two ProcMeshes, created here
    python examples/sharing_gpus.py --kubernetes --gpus dra          # ... sharing ResourceClaims
    python examples/sharing_gpus.py --kubernetes --via-api-server   # from outside: port-forwards
    python examples/sharing_gpus.py --attach [--namespace NS]        # kubectl apply -f examples/meshes/rl-pinned-pair.yaml first

On Kubernetes the policy and the trainer are ProcMeshes pinned to the same devices, the trainer
colocated with the policy, each proc capped by the operator's memory-fraction bootstrap. With
``--gpus dra`` (a cluster with a DRA GPU driver, Kubernetes 1.34+) the operator creates the
policy's ResourceClaims, the kube-scheduler allocates their devices, and the trainer's procs use
the same claims, so each sees the device of the policy's proc at the same point.
"""

import argparse
import os
from functools import partial

import torch

from mesh_client import Actor, default_bootstrap_cmd, endpoint, this_host

DEVICE_IDS = [int(i) for i in os.environ.get("PROCMESH_DEVICE_IDS", "0,1").split(",")]
HIDDEN = 1024
BATCH = 64


# Asked inside each proc, never fixed in the controller: on Kubernetes the controller may be a
# laptop without a GPU while every proc has one (or the other way round).
def cuda():
    return torch.cuda.is_available()


def device():
    return "cuda" if cuda() else "cpu"


def cuda_report():
    """What this process sees of CUDA: torch's version and build, and the device it was given."""
    return {
        "torch": torch.__version__,
        "built for CUDA": torch.version.cuda,
        "available": cuda(),
        "device": torch.cuda.get_device_name(0) if cuda() else None,
    }


def on_gpus(device_ids):
    """Coordinate gpus=i runs on GPU device_ids[i]: each proc sees exactly one device as cuda."""
    base = default_bootstrap_cmd()

    def command(point):
        return base.with_env({"CUDA_VISIBLE_DEVICES": str(device_ids[point["gpus"]])})

    return command


def cap_memory(fraction):
    """In each proc before any actor runs: cap its PyTorch allocator (where it has CUDA)."""
    if cuda():
        torch.cuda.set_per_process_memory_fraction(fraction)


def memory_cap(fraction):
    """The bootstrap that caps each proc's allocator at ``fraction``."""
    return partial(cap_memory, fraction)


class GpuActor(Actor):
    @endpoint
    def memory(self):
        return {
            "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"),
            # The device the node exposed (pinned: the pod's choice; dra: the claim's device).
            "device": str(torch.cuda.get_device_properties(0).uuid) if cuda()
            else os.environ.get("NVIDIA_VISIBLE_DEVICES"),
            "allocated": torch.cuda.memory_allocated() if cuda() else 0,
            "reserved": torch.cuda.memory_reserved() if cuda() else 0,
        }

    @endpoint
    def cuda_info(self):
        return cuda_report()


class Policy(GpuActor):
    def __init__(self):
        self.device = device()
        self.model = torch.nn.Linear(HIDDEN, HIDDEN, device=self.device)

    @endpoint
    def generate(self):
        with torch.no_grad():
            return self.model(torch.randn(BATCH, HIDDEN, device=self.device)).norm().item()


class Trainer(GpuActor):
    def __init__(self):
        self.device = device()
        self.model = torch.nn.Linear(HIDDEN, HIDDEN, device=self.device)
        self.optim = torch.optim.SGD(self.model.parameters(), lr=1e-3, foreach=True)

    @endpoint
    def train_step(self):
        loss = self.model(torch.randn(BATCH, HIDDEN, device=self.device)).pow(2).mean()
        loss.backward()
        self.optim.step()
        self.optim.zero_grad()
        return loss.item()


def report(label, role):
    for usage in role.memory.call().get().values():
        print(label, usage)


def report_cuda(label, role):
    """Each proc's own view of CUDA (on Kubernetes: the pod's torch and GPU, not this host's)."""
    for point, seen in role.cuda_info.call().get().items():
        where = ", ".join(f"{k}={v}" for k, v in point.items())
        device_ = seen["device"] or "no CUDA device: running on the CPU, without memory caps"
        print(f"{label} proc {where}: torch {seen['torch']} (CUDA build {seen['built for CUDA']}), "
              f"CUDA available: {seen['available']}, {device_}")


def local_meshes():
    if cuda() and max(DEVICE_IDS) >= torch.cuda.device_count():
        raise SystemExit(f"this host has no GPU {max(DEVICE_IDS)}; edit DEVICE_IDS or set PROCMESH_DEVICE_IDS")
    # Concurrent sharing: the same list for both roles, so proc i of each shares GPU DEVICE_IDS[i].
    policy_procs = this_host().spawn_procs(
        per_host={"gpus": len(DEVICE_IDS)},
        bootstrap_command=on_gpus(DEVICE_IDS),
        bootstrap=memory_cap(0.3),
        name="policy",
    )
    trainer_procs = this_host().spawn_procs(
        per_host={"gpus": len(DEVICE_IDS)},
        bootstrap_command=on_gpus(DEVICE_IDS),
        bootstrap=memory_cap(0.6),
        name="trainer",
    )
    return policy_procs, trainer_procs


def kubernetes_meshes(namespace, via_api_server=False, image=None, gpus="pinned"):
    # The same two roles as ProcMeshes: pinned to DEVICE_IDS (or, with dra, on the devices the
    # scheduler allocates to the policy's claims), the trainer on the policy's devices.
    from mesh_client.kubernetes import KubernetesHostMesh

    hosts = KubernetesHostMesh(hosts=1, namespace=namespace, via_api_server=via_api_server, image=image)
    policy_procs = hosts.spawn_procs(
        per_host={"gpus": len(DEVICE_IDS)}, gpus=DEVICE_IDS if gpus == "pinned" else "dra",
        memory_fraction=0.3, name="policy"
    )
    trainer_procs = hosts.spawn_procs(
        per_host={"gpus": len(DEVICE_IDS)}, gpus=gpus, memory_fraction=0.6, colocate_with=policy_procs, name="trainer"
    )
    return policy_procs, trainer_procs


def attached_meshes(namespace):
    # Meshes someone applied: kubectl apply -f examples/meshes/rl-pinned-pair.yaml
    from mesh_client.kubernetes import attach

    return attach("policy", namespace), attach("trainer", namespace)


def first(values):
    """The value at the first point, whatever the dimensions (Kubernetes meshes add ``hosts``)."""
    return values.item(**dict.fromkeys(values.sizes, 0))


def main():
    parser = argparse.ArgumentParser(description="Two roles sharing GPUs")
    parser.add_argument("--kubernetes", action="store_true", help="create the two meshes as ProcMeshes")
    parser.add_argument("--attach", action="store_true", help="attach to ProcMeshes 'policy' and 'trainer'")
    parser.add_argument("--namespace", default=None)
    parser.add_argument("--via-api-server", action="store_true",
                        help="reach the procs through the API server (a client outside the pod network)")
    parser.add_argument("--image", default=None,
                        help="image of the procs (with torch); default: the operator's proc-server image")
    parser.add_argument("--gpus", choices=["pinned", "dra"], default="pinned",
                        help="--kubernetes: pin device IDs, or share ResourceClaims (dra)")
    args = parser.parse_args()
    if args.kubernetes:
        policy_procs, trainer_procs = kubernetes_meshes(args.namespace, args.via_api_server, args.image, args.gpus)
    elif args.attach:
        policy_procs, trainer_procs = attached_meshes(args.namespace)
    else:
        policy_procs, trainer_procs = local_meshes()

    policy = policy_procs.spawn("policy", Policy)
    trainer = trainer_procs.spawn("trainer", Trainer)
    report_cuda("policy", policy)
    report_cuda("trainer", trainer)

    generated = policy.generate.call()
    losses = trainer.train_step.call()
    print("generated:", first(generated.get()), "loss:", first(losses.get()))

    # Taking turns: wait for each call before issuing the next, so one role computes at a time.
    for step in range(3):
        policy.generate.call().get()
        loss = first(trainer.train_step.call().get())
        print(f"step {step}: loss={loss:.4f}")

    # Co-locating: the reference model shares the trainer's processes, context and cap.
    report("policy", policy)
    report("trainer", trainer)
    reference = trainer_procs.spawn("reference", Policy)
    reference.generate.call().get()
    report("trainer + reference", trainer)

    policy_procs.stop().get()
    trainer_procs.stop().get()
    print("Example completed successfully!")


if __name__ == "__main__":
    main()
