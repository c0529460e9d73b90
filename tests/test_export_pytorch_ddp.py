"""The exported train.py under torchrun: 2 processes (DistributedDataParallel over gloo, on
loopback) log the losses of 1 process and end with its parameters, in float64 to 1e-12; a
batch that does not split over the processes is one line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from presk.data import read

ROOT = Path(__file__).resolve().parent.parent
PRESK = str(Path(sys.executable).parent / "presk")
ENV = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
FLAGS = ["--steps", "20", "--log-every", "1", "--dtype", "float64", "--device", "cpu"]

torch = pytest.importorskip("torch", reason="torch is needed to run the exported code")
if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
    pytest.skip("this torch has no gloo backend for torch.distributed", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def python(out: Path, *argv: str, env: dict[str, str] = ENV) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], cwd=out, capture_output=True, text=True, check=False, env=env
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ddp") / "t"
    argv = [PRESK, "export", "tutorial/07_train.psk", "--target", "pytorch", "--mode", "readable"]
    done = subprocess.run(
        [*argv, "--train", "-o", str(out)], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return out


def logged(stdout: str) -> list[tuple[str, list[float]]]:
    """Each log line as (`step N  epoch E`, [loss, lr, |g|])."""
    out = []
    for line in stdout.splitlines():
        if line.startswith("step "):
            fields = line.split("  ")
            out.append(("  ".join(fields[:2]), [float(f.split()[1]) for f in fields[2:]]))
    return out


def test_two_processes_train_as_one(exported: Path) -> None:
    one = python(exported, "train.py", *FLAGS, "--ckpt", "one", "--threads", "1")
    assert one.returncode == 0, one.stderr
    launch = ["-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={free_port()}"]
    two = python(exported, *launch, "train.py", *FLAGS, "--ckpt", "two")
    assert two.returncode == 0, two.stdout + two.stderr
    # rank 0 alone prints: 20 log lines, the step time and the summary
    lines = two.stdout.splitlines()
    assert len(lines) == 22 and "steps of Tower on 2 processes, final loss" in lines[-1]
    single, double = logged(one.stdout), logged(two.stdout)
    assert [s for s, _ in single] == [s for s, _ in double] and len(single) == 20
    for (_, figures), (_, others) in zip(single, double, strict=True):
        assert np.allclose(others, figures, rtol=1e-12, atol=0.0), (others, figures)
    a, b = read(exported / "one" / "final.psk.d"), read(exported / "two" / "final.psk.d")
    assert a.type == b.type and a.arrays.keys() == b.arrays.keys()
    for path, want in a.arrays.items():
        scale = float(np.abs(want).max())
        assert float(np.abs(b.arrays[path] - want).max()) <= 1e-12 * scale, path
    # the run moved the parameters: equal finals are not just θ₀ twice
    theta0 = read(exported / "theta0.psk.d")
    assert any(not np.array_equal(theta0.arrays[p], v) for p, v in a.arrays.items())


def test_the_readme_says_how_to_run_on_a_cluster(exported: Path) -> None:
    text = (exported / "README.md").read_text(encoding="utf-8")
    for flag in ("--nproc_per_node=", "--nnodes=", "--node_rank=", "--rdzv-endpoint="):
        assert flag in text, flag


def test_a_batch_that_does_not_split_is_one_line(exported: Path) -> None:
    """Rank 0 of 3 (torchrun's environment) refuses B = 8 before it waits for the others."""
    env = {**ENV, "RANK": "0", "WORLD_SIZE": "3", "LOCAL_RANK": "0"}
    done = python(exported, "train.py", *FLAGS, env=env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "the batch of 8 rows does not split over 3 processes" in done.stderr
    quiet = python(exported, "train.py", *FLAGS, env={**env, "RANK": "1", "LOCAL_RANK": "1"})
    assert quiet.returncode == 2 and quiet.stdout == quiet.stderr == ""
