"""A tiny DDP training run, torchrun-style, on a proc mesh: local procs or a ProcMesh.

The controller spawns the mesh and runs this same file in every proc with ``SPMDActor.main``,
which sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ... as torchrun would. The worker part is
an ordinary torchrun script: ``init_process_group`` from the environment, DDP, a few steps.

    python examples/spmd_train.py                              # 2 local procs (gloo on CPU, NCCL on GPUs)
    python examples/spmd_train.py --kubernetes --hosts 2       # a 2x2 ProcMesh created here
    python examples/spmd_train.py --attach NAME                # an existing ProcMesh

On a real cluster the script must exist in the proc-server image at the same path (or use
["-m", "your.module"]); the test process node runs pods on this machine, so it does.
"""

import argparse
import os
import sys


def worker(steps: int) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    cuda = torch.cuda.is_available()
    if cuda:
        # A pinned proc sees its one GPU as cuda:0; an unpinned one picks by LOCAL_RANK.
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(32, 1).to(device), device_ids=[device.index] if cuda else None)
    optim = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(int(os.environ["RANK"]))
    w_true = torch.arange(32, dtype=torch.float32) / 32
    for step in range(steps):
        x = torch.randn(64, 32, generator=g)
        y = x @ w_true
        loss = (model(x.to(device)).squeeze(1) - y.to(device)).pow(2).mean()
        optim.zero_grad()
        loss.backward()
        optim.step()
        if os.environ["RANK"] == "0" and step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f} (world size {dist.get_world_size()})", flush=True)
    # every rank holds the same weights after DDP
    weights = model.module.weight.detach().flatten().cpu()
    check = weights.clone().to(device)
    dist.all_reduce(check)
    assert torch.allclose(check.cpu() / dist.get_world_size(), weights, atol=1e-6)
    dist.destroy_process_group()


def controller(args: argparse.Namespace) -> None:
    from mesh_client import this_host
    from mesh_client.spmd import SPMDActor

    if args.attach:
        from mesh_client.kubernetes import attach

        procs = attach(args.attach, args.namespace)
    elif args.kubernetes:
        from mesh_client.kubernetes import KubernetesHostMesh

        procs = KubernetesHostMesh(hosts=args.hosts, namespace=args.namespace).spawn_procs(
            per_host={"gpus": args.per_host}, name="spmd-train"
        )
    else:
        procs = this_host().spawn_procs(per_host={"gpus": args.per_host})
    try:
        actors = procs.spawn("_SPMDActor", SPMDActor)
        first = dict.fromkeys(procs.extent.labels, 0)
        master_addr, master_port = actors.slice(**first).get_host_port.call_one(None).get()
        script = os.path.abspath(__file__)
        done = actors.main.call(master_addr, master_port, [script, "--worker", "--steps", str(args.steps)]).get()
        print(f"trained on {len(done)} procs: {all(done.values())}")
    finally:
        procs.stop().get()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--per-host", type=int, default=2)
    parser.add_argument("--hosts", type=int, default=1)
    parser.add_argument("--kubernetes", action="store_true")
    parser.add_argument("--attach", metavar="NAME")
    parser.add_argument("--namespace")
    args = parser.parse_args()
    if args.worker:
        worker(args.steps)
    else:
        controller(args)


if __name__ == "__main__":
    sys.exit(main())
