"""GPU sharing benchmark: a policy and a trainer on the same GPUs, through actors and without.

For a compute-heavy generate step and train step (bf16 MLP), it measures on the GPUs in
``--devices``: each role's throughput alone; both concurrently on shared GPUs (each proc capped
by a memory fraction); both taking turns; the overhead of driving a role through actors against
the same loop in plain processes (target: at most 2%); and the CUDA context memory of one process.

    python benchmarks/gpu_sharing.py --devices 0,1          # table
    python benchmarks/gpu_sharing.py --devices 0 --json     # JSON
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import time
from functools import partial

HIDDEN = 8192
BATCH = 4096
LAYERS = 4
INNER = 8  # forward (or training) iterations per step, so a step is compute-heavy


def build(seed: int):
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(*[torch.nn.Linear(HIDDEN, HIDDEN, bias=False) for _ in range(LAYERS)]).to(
        "cuda", torch.bfloat16
    )


def generate_step(model) -> float:
    import torch

    with torch.no_grad():
        x = torch.randn(BATCH, HIDDEN, device="cuda", dtype=torch.bfloat16)
        for _ in range(INNER):
            x = torch.tanh(model(x))
        return x.float().norm().item()


def train_step(model, optim) -> float:
    import torch

    total = 0.0
    for _ in range(INNER // 2):
        x = torch.randn(BATCH, HIDDEN, device="cuda", dtype=torch.bfloat16)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        optim.step()
        optim.zero_grad(set_to_none=True)
        total += loss.detach()
    return float(total)


# --- through actors -------------------------------------------------------------------------

def _actors():
    from mesh_client import Actor, endpoint

    class Policy(Actor):
        def __init__(self):
            self.model = build(0)

        @endpoint
        def generate(self) -> float:
            return generate_step(self.model)

        @endpoint
        def generate_timed(self) -> float:
            """The step's own seconds, measured inside the actor (apart from the call's)."""
            start = time.perf_counter()
            generate_step(self.model)
            return time.perf_counter() - start

    class Trainer(Actor):
        def __init__(self):
            import torch

            self.model = build(1)
            self.optim = torch.optim.SGD(self.model.parameters(), lr=1e-6, foreach=True)

        @endpoint
        def train(self) -> float:
            return train_step(self.model, self.optim)

        @endpoint
        def train_timed(self) -> float:
            start = time.perf_counter()
            train_step(self.model, self.optim)
            return time.perf_counter() - start

    return Policy, Trainer


def on_gpus(device_ids):
    from mesh_client import default_bootstrap_cmd

    base = default_bootstrap_cmd().with_env({"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    return lambda point: base.with_env({"CUDA_VISIBLE_DEVICES": str(device_ids[point["gpus"]])})


def step_split(call, steps: int) -> tuple[float, float]:
    """Median ms of a step measured inside the actor, and of the whole call around it: what a
    step costs through actors beyond the step itself is the difference."""
    import statistics

    inside, whole = [], []
    for _ in range(steps):
        start = time.perf_counter()
        values = call().get()
        whole.append(time.perf_counter() - start)
        inside.append(max(v for _, v in values.items()))
    return 1000 * statistics.median(inside), 1000 * statistics.median(whole)


def plain_step_ms(fn, steps: int) -> float:
    """Median ms of one step in a plain loop (after the timed run's warm-up)."""
    import statistics

    times = []
    for _ in range(steps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def timed(fn, steps: int) -> float:
    """Steps per second of ``fn`` (each call is one step on every GPU), after a warm-up."""
    fn()
    fn()
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    return steps / (time.perf_counter() - start)


def actor_figures(device_ids: list[int], steps: int) -> dict[str, float]:
    import torch

    from mesh_client import this_host

    Policy, Trainer = _actors()
    n = len(device_ids)
    policy_procs = this_host().spawn_procs(
        per_host={"gpus": n}, bootstrap_command=on_gpus(device_ids),
        bootstrap=partial(torch.cuda.set_per_process_memory_fraction, 0.3), name="policy",
    )
    trainer_procs = this_host().spawn_procs(
        per_host={"gpus": n}, bootstrap_command=on_gpus(device_ids),
        bootstrap=partial(torch.cuda.set_per_process_memory_fraction, 0.6), name="trainer",
    )
    policy = policy_procs.spawn("policy", Policy)
    trainer = trainer_procs.spawn("trainer", Trainer)
    out = {
        "policy_alone_steps_per_s": timed(lambda: policy.generate.call().get(), steps),
        "trainer_alone_steps_per_s": timed(lambda: trainer.train.call().get(), steps),
    }
    for role, call in (("policy", policy.generate_timed.call), ("trainer", trainer.train_timed.call)):
        out[f"{role}_step_inside_actor_ms"], out[f"{role}_call_ms"] = step_split(call, steps)

    def both():
        g, t = policy.generate.call(), trainer.train.call()
        g.get()
        t.get()

    out["concurrent_pairs_per_s"] = timed(both, steps)

    def turns():
        policy.generate.call().get()
        trainer.train.call().get()

    out["turns_pairs_per_s"] = timed(turns, steps)
    policy_procs.stop().get()
    trainer_procs.stop().get()
    return out


# --- the same loops in plain processes --------------------------------------------------------

def _plain_worker(role: str, device: int, steps: int, queue) -> None:
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    os.environ["CUDA_VISIBLE_DEVICES"] = str(device)
    import torch

    torch.cuda.set_per_process_memory_fraction(0.3 if role == "policy" else 0.6)
    if role == "policy":
        model = build(0)
        fn = partial(generate_step, model)
    else:
        model = build(1)
        optim = torch.optim.SGD(model.parameters(), lr=1e-6, foreach=True)
        fn = partial(train_step, model, optim)
    queue.put((timed(fn, steps), plain_step_ms(fn, steps)))


def plain_figures(device_ids: list[int], steps: int) -> dict[str, float]:
    ctx = mp.get_context("spawn")
    out = {}
    for role in ("policy", "trainer"):
        queue = ctx.Queue()
        workers = [ctx.Process(target=_plain_worker, args=(role, d, steps, queue)) for d in device_ids]
        for w in workers:
            w.start()
        results = [queue.get() for _ in workers]
        for w in workers:
            w.join()
        # the mesh steps in lock-step, so its rate is the slowest GPU's
        out[f"{role}_alone_steps_per_s"] = min(rate for rate, _ in results)
        out[f"{role}_step_ms"] = max(step for _, step in results)
    return out


def _context_worker(device: int, queue) -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = str(device)
    import torch

    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    queue.put(os.getpid())
    time.sleep(3)


def context_memory_mib(device: int) -> float | None:
    """What nvidia-smi charges a process that only created its CUDA context (plus one tiny tensor)."""
    if shutil.which("nvidia-smi") is None:
        return None
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_context_worker, args=(device, queue))
    proc.start()
    pid = queue.get()
    out = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
        capture_output=True, text=True,
    ).stdout
    proc.join()
    for line in out.strip().splitlines():
        p, mib = (x.strip() for x in line.split(","))
        if int(p) == pid:
            return float(mib)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", default="0,1")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("gpu_sharing: CUDA is not available on this machine; nothing to measure")
        return
    device_ids = [int(d) for d in args.devices.split(",")]
    actors = actor_figures(device_ids, args.steps)
    plain = plain_figures(device_ids, args.steps)
    result = {
        "devices": device_ids,
        "gpu": torch.cuda.get_device_name(0),
        "model": {"hidden": HIDDEN, "batch": BATCH, "layers": LAYERS, "inner": INNER, "dtype": "bfloat16"},
        "actors": actors,
        "plain": plain,
        "actor_overhead_pct": {
            role: 100 * (plain[f"{role}_alone_steps_per_s"] / actors[f"{role}_alone_steps_per_s"] - 1)
            for role in ("policy", "trainer")
        },
        "cuda_context_mib": context_memory_mib(device_ids[0]),
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    a, p = actors, plain
    print(f"GPUs {device_ids} ({result['gpu']}), bf16 MLP {LAYERS}x{HIDDEN}, batch {BATCH}, {INNER} iterations a step")
    print(f"{'figure':44} {'actors':>10} {'plain':>10}")
    print(f"{'policy alone (steps/s)':44} {a['policy_alone_steps_per_s']:10.2f} {p['policy_alone_steps_per_s']:10.2f}")
    print(f"{'trainer alone (steps/s)':44} {a['trainer_alone_steps_per_s']:10.2f} {p['trainer_alone_steps_per_s']:10.2f}")
    print(f"{'both concurrently, shared GPUs (pairs/s)':44} {a['concurrent_pairs_per_s']:10.2f}")
    print(f"{'taking turns (pairs/s)':44} {a['turns_pairs_per_s']:10.2f}")
    for role in ("policy", "trainer"):
        print(f"{role + ' step, median ms: in the actor / the call':44} {a[role + '_step_inside_actor_ms']:10.2f} "
              f"{p[role + '_step_ms']:10.2f}")
        print(f"{'  the call around it (ms)':44} {a[role + '_call_ms']:10.2f}")
    for role, pct in result["actor_overhead_pct"].items():
        print(f"actor overhead, {role}: {pct:+.2f}% (target <= 2%)")
    print(f"CUDA context per process: {result['cuda_context_mib']} MiB")


if __name__ == "__main__":
    main()
