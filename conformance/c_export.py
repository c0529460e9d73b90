"""`make c-conformance`: exported C programs against the native backend, bit for bit.

For every program below and each realization (f64, f32, bf16), the entry is
exported (with splits for two threads), built with gcc and with clang, with
and without OpenMP, run on one thread and on two, and its output file is
compared byte for byte with the native backend's. The `--train` exports of
the training runs below are built the same ways and pass their `make check`
(20 steps against `presk train --backend native`). One line per program and
realization, then `N passed, M failed`. `--fast` runs the subset `make test`
uses.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRESK = [sys.executable, "-m", "presk.cli"]
MINI = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2"]

PROGRAMS: list[tuple[str, list[str]]] = [
    ("mse", ["tests/examples/mlp/mlp.psk", "--entry", "mse", "--dim", "D=4", "--dim", "B=3"]),
    ("mse_grad", ["tests/examples/mlp/mlp.psk", "--entry", "mse_grad", "--dim", "D=4", "--dim", "B=3"]),
    ("RMSNorm{8}.apply", ["tutorial/02_norm.psk", "--entry", "RMSNorm{8}.apply", "--dim", "batch=3"]),
    ("Tower.apply", ["tutorial/06_tower.psk", "--entry", "Tower.apply", "--dim", "batch=2"]),
    ("attend B=1 T=3", ["tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=1", "--dim", "T=3"]),
    ("attend B=16 T=256", ["tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=16", "--dim", "T=256"]),
    ("loss_grad (tutorial 04)", ["tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3", "--dim", "B=2"]),
    ("tower loss_grad", ["tests/ad/tower_grad.psk", "--entry", "loss_grad", "--dim", "B=2"]),
    ("MiniGPT.apply", ["tests/examples/minigpt/minigpt.psk", "--entry", "MiniGPT.apply", *MINI, "--dim", "B=2", "--dim", "T=8"]),
    ("MiniGPT loss", ["tests/examples/minigpt/train_minigpt.psk", "--entry", "loss", *MINI, "--dim", "B=2", "--dim", "T=8"]),
    ("MiniGPT loss_grad", ["tests/ad/minigpt_grad.psk", "--entry", "loss_grad", *MINI, "--dim", "B=2", "--dim", "T=8"]),
]  # fmt: skip
FAST = {"attend B=1 T=3", "MiniGPT loss"}
# `--train` exports: the trainer's `make check` (20 steps against presk train --backend native).
TRAINERS: list[tuple[str, list[str]]] = [
    ("train tutorial 07", ["tutorial/07_train.psk"]),
    ("train regression", ["tests/train/regression.psk"]),
]


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def check_one(name: str, args: list[str], realize: str, compilers: list[str]) -> str | None:
    """None when every build and run gives the native bits, else what failed."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "export"
        done = _run([*PRESK, "export", *args, "--realize", realize, "--threads", "2", "-o", str(out)], ROOT)
        if done.returncode != 0:
            return f"export failed: {done.stderr.strip()[-300:]}"
        for cc in compilers:
            for openmp in ("-fopenmp", ""):
                for threads in ("1", "2"):
                    env = {**os.environ, "OMP_NUM_THREADS": threads}
                    _run(["make", "-s", "clean"], out)
                    # Without OpenMP, also without -march=native: a portable build, the same bits.
                    march = [] if openmp else ["MARCH="]
                    build = _run(["make", "-s", f"CC={cc}", f"OPENMP={openmp}", *march, "model"], out, env)
                    if build.returncode != 0 or "warning" in build.stderr:
                        return f"{cc} {openmp or 'no OpenMP'}: {build.stderr.strip()[-300:]}"
                    check = _run(["sh", "conformance/check.sh"], out, env)
                    if check.returncode != 0:
                        return f"{cc} {openmp or 'no OpenMP'} {threads} thread(s): {check.stderr.strip()}"
    return None


def check_train(args: list[str], realize: str, compilers: list[str]) -> str | None:
    """None when the exported trainer's `make check` passes on every build and team."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "train"
        export = [*PRESK, "export", *args, "--target", "c", "--train", "--realize", realize]
        done = _run([*export, "--threads", "2", "-o", str(out)], ROOT)
        if done.returncode != 0:
            return f"export failed: {done.stderr.strip()[-300:]}"
        builds = [(cc, openmp, n) for cc in compilers for openmp in ("-fopenmp", "") for n in "12"]
        for cc, openmp, threads in builds:
            env = {**os.environ, "OMP_NUM_THREADS": threads}
            what = f"{cc} {openmp or 'no OpenMP'}"
            _run(["make", "-s", "clean"], out)
            march = [] if openmp else ["MARCH="]
            build = _run(["make", "-s", f"CC={cc}", f"OPENMP={openmp}", *march, "train"], out, env)
            if build.returncode != 0 or "warning" in build.stderr:
                return f"{what}: {build.stderr.strip()[-300:]}"
            check = _run(["sh", "conformance/check.sh"], out, env)
            if check.returncode != 0:
                return f"{what} {threads} thread(s): {check.stderr.strip()}"
    return None


def check_scop(args: list[str], realize: str, compilers: list[str]) -> str | None:
    """None when every nest of `--mode scop` gives the native bits on every compiler."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "scop"
        done = _run([*PRESK, "export", *args, "--mode", "scop", "--realize", realize, "-o", str(out)], ROOT)
        if done.returncode != 0:
            return f"export failed: {done.stderr.strip()[-300:]}"
        for cc in compilers:
            _run(["make", "-s", "clean"], out)
            check = _run(["make", "-s", f"CC={cc}", "check"], out)
            if check.returncode != 0 or "warning" in check.stderr:
                return f"{cc}: {(check.stdout + check.stderr).strip()[-300:]}"
    return None


def main(argv: list[str]) -> int:
    fast = "--fast" in argv
    compilers = [cc for cc in ("gcc", "clang") if shutil.which(cc)]
    if not compilers:
        print("c-conformance: no C compiler")
        return 1
    passed = failed = 0
    for name, args in PROGRAMS:
        if fast and name not in FAST:
            continue
        for realize in ("f64", "f32", "bf16"):
            runs = [
                (
                    f"{name} [{realize}]",
                    check_one(name, args, realize, compilers),
                    f"{', '.join(compilers)} × OpenMP on/off × 1, 2 threads",
                )
            ]
            if not fast:
                runs.append(
                    (
                        f"{name} [{realize}, scop]",
                        check_scop(args, realize, compilers),
                        f"every nest at point zero, {', '.join(compilers)}",
                    )
                )
            for label, problem, what in runs:
                if problem is None:
                    passed += 1
                    print(f"ok    {label:<36} {what}")
                else:
                    failed += 1
                    print(f"FAIL  {label:<36} {problem}")
    for name, args in TRAINERS:
        if fast and name != TRAINERS[0][0]:
            continue
        for realize in ("f64", "f32", "bf16"):
            label = f"{name} [{realize}]"
            problem = check_train(args, realize, compilers)
            if problem is None:
                passed += 1
                builds = f"{', '.join(compilers)} × OpenMP on/off × 1, 2 threads"
                print(f"ok    {label:<36} make check (20 steps), {builds}")
            else:
                failed += 1
                print(f"FAIL  {label:<36} {problem}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
