"""The examples run as users run them (CPU mode here; tests/gpu runs them on GPUs)."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]


def run(*args: str, env: dict | None = None) -> str:
    out = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})}
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_sharing_gpus_runs_every_step():
    out = run("examples/sharing_gpus.py")
    assert "generated:" in out and "step 2: loss=" in out
    assert out.count("trainer + reference") == 2
    assert "Example completed successfully!" in out


def test_spmd_train_trains_ddp_on_two_procs():
    out = run("examples/spmd_train.py", "--steps", "12")
    assert "step 10: loss" in out and "(world size 2)" in out
    assert "trained on 2 procs: True" in out
