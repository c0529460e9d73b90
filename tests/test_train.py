"""`presk train`: the generated optimizer, the data pipeline, the loop, checkpoints.

The tutorial's run (tutorial/07_train.psk: the tower of 06 learning y = 2x + 1) is the
subject throughout; each expected value is computed here from its definition (the
schedule's formula, AdamW written out in NumPy), not copied from a run.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO_ROOT, run_presk

from presk.data import samples
from presk.interp import rng
from presk.pipeline import compile_path, front_end
from presk.train import checkpoint
from presk.train.data import load, permutation

TRAIN = "tutorial/07_train.psk"


def _steps(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("step ")]


def _leaves(tree: dict, prefix: str = "") -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = np.asarray(value, dtype=np.float64)
    return out


# ---------------------------------------------------------------- the generated Core


def test_the_blocks_generate_core_functions() -> None:
    code, out, err = run_presk("dump", TRAIN, "--stage", "core")
    assert code == 0, err
    for head in (
        "fn adamw.lr(t : idx[9007199254740992][], total : idx[9007199254740992][]) -> ℝ[]",
        "fn adamw.step(θ : params Tower",
        "fn run.step{B}(θ : params Tower",
    ):
        assert head in out
    assert "value_and_grad[0] loss{B = B}(θ, batch)" in out
    # They are entries of their own, but not part of the summary of declared functions.
    code, summary, _ = run_presk("check", TRAIN, "--summary")
    assert code == 0 and "adamw" not in summary.split("-- training --")[0]


def test_the_schedule_is_warmup_then_cosine() -> None:
    compiled, *_ = compile_path(TRAIN, "adamw.lr", {}, _f64())
    warmup, total, lr = 20, 100, 0.01
    for t in (1, 7, 20, 21, 40, 60, 80, 99, 100):
        if t <= warmup:
            want = lr * t / warmup
        else:
            want = lr * 0.5 * (1 + math.cos(math.pi * (t - warmup) / (total - warmup)))
        got = float(compiled(np.int64(t), np.int64(total)))
        assert got == pytest.approx(want, rel=1e-15, abs=1e-18), t
    # A horizon inside the warm-up never divides by zero.
    assert float(compiled(np.int64(5), np.int64(10))) == pytest.approx(lr * 5 / warmup)


def _f64():  # type: ignore[no-untyped-def]
    from presk.host.realization import Realization

    return Realization("f64")


def test_adamw_step_is_adamw() -> None:
    """One update against AdamW written out in NumPy (decoupled decay, bias-corrected)."""
    compiled, checked, *_ = compile_path(TRAIN, "adamw.step", {}, _f64())
    opt = checked.trainings[0].optimizer
    b1, b2, eps = float(opt.beta1), float(opt.beta2), float(opt.eps)
    gen = np.random.default_rng(5)
    theta = _tree_like(compiled, gen)
    m, v, g = (_tree_like(compiled, gen) for _ in range(3))
    v = {k: np.abs(x) for k, x in _leaves(v).items()}
    flat = {name: _leaves(t) for name, t in (("θ", theta), ("m", m), ("g", g))}
    t, lr = 7, 0.003
    new_theta, new_m, new_v = compiled(theta, m, _nest(v), g, np.int64(t), np.float64(lr))
    for path, x in flat["θ"].items():
        m1 = b1 * flat["m"][path] + (1 - b1) * flat["g"][path]
        v1 = b2 * v[path] + (1 - b2) * flat["g"][path] ** 2
        step = lr * (m1 / (1 - b1**t)) / (np.sqrt(v1 / (1 - b2**t)) + eps)
        np.testing.assert_allclose(_leaves(new_m)[path], m1, rtol=1e-14, atol=1e-16)
        np.testing.assert_allclose(_leaves(new_v)[path], v1, rtol=1e-14, atol=1e-16)
        np.testing.assert_allclose(_leaves(new_theta)[path], x - step, rtol=1e-13, atol=1e-16)


def _tree_like(compiled, gen):  # type: ignore[no-untyped-def]
    from presk.host.ir import HTensor, HTree

    def build(layout):  # type: ignore[no-untyped-def]
        if isinstance(layout, HTree):
            return {k: build(v) for k, v in layout.items}
        assert isinstance(layout, HTensor)
        return gen.standard_normal(tuple(s for _, s in layout.axes))

    return build(compiled.layouts[0])


def _nest(flat: dict[str, np.ndarray]) -> dict:
    out: dict = {}
    for path, value in flat.items():
        node = out
        *parents, last = path.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return out


# ---------------------------------------------------------------- the data pipeline


def test_permutations_are_counter_based() -> None:
    key = rng.key_for(3, "data/epoch/1")
    p = permutation(key, 1000)
    assert sorted(p.tolist()) == list(range(1000))
    assert p.tolist() == permutation(key, 1000).tolist()
    assert p.tolist() != permutation(rng.key_for(3, "data/epoch/2"), 1000).tolist()
    # Fisher–Yates from the top with randbelow, one draw per position.
    words = rng.u64_stream(key, 999)
    want = list(range(1000))
    for draw, i in enumerate(range(999, 0, -1)):
        j = (words[draw] * (i + 1)) >> 64
        want[i], want[j] = want[j], want[i]
    assert p.tolist() == want


def test_batches_cover_each_epoch_once() -> None:
    checked, _ = front_end(TRAIN, {})
    batches = load(checked.trainings[0])
    assert batches.dims == {"B": 8} and batches.per_epoch == 16 and batches.dropped == 0
    order = batches.order(1)
    seen = [batches.batch(step, order)[0] for step in range(1, 17)]
    rows = np.concatenate(seen)
    assert rows.shape == (128, 4)
    everything = samples.read("tutorial/data/pairs.psk.d").arrays["0"]
    assert sorted(map(tuple, rows.tolist())) == sorted(map(tuple, everything.tolist()))


# ---------------------------------------------------------------- the loop


def test_reference_and_native_print_the_same_log(tmp_path: Path) -> None:
    args = ("train", TRAIN, "--steps", "40", "--log-every", "10")
    code, ref, err = run_presk(*args, "--ckpt", str(tmp_path / "r"))
    assert code == 0, err
    code, nat, err = run_presk(*args, "--ckpt", str(tmp_path / "n"), "--backend", "native")
    assert code == 0, err
    assert len(_steps(ref)) == 4 and _steps(ref) == _steps(nat)
    assert "kernel launches a step" in nat and "a step, median of 39" in nat
    assert "40 steps of Tower, final loss" in ref.splitlines()[-1]
    log = [json.loads(x) for x in (tmp_path / "r" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 41))
    assert log[19]["lr"] == pytest.approx(0.01)


def test_native_f64_and_f32_stay_close_to_the_reference(tmp_path: Path) -> None:
    """200 AdamW steps of a small regression: f64 within 1e-14 of the exact run, f32
    within 1e-6 (the largest difference relative to the largest weight)."""
    base = ("train", "tests/train/regression.psk", "--steps", "200", "--log-every", "1000")
    finals = {}
    for name, extra in (
        ("ref", ()),
        ("f64", ("--backend", "native")),
        ("f32", ("--backend", "native", "--realize", "f32")),
    ):
        code, _, err = run_presk(*base, "--ckpt", str(tmp_path / name), *extra)
        assert code == 0, err
        finals[name] = _leaves(samples.read(tmp_path / name / "final.psk.d")[0])
    scale = max(np.abs(x).max() for x in finals["ref"].values())
    for name, tol in (("f64", 1e-14), ("f32", 1e-6)):
        gap = max(np.abs(finals[name][p] - x).max() for p, x in finals["ref"].items()) / scale
        assert gap < tol, (name, gap)
    assert gap > 0  # f32 is not f64


@pytest.mark.parametrize("backend", ["interp", "native"])
def test_resume_continues_to_the_bit(tmp_path: Path, backend: str) -> None:
    args = ("train", TRAIN, "--steps", "40", "--log-every", "5", "--backend", backend)
    code, whole, err = run_presk(*args, "--ckpt", str(tmp_path / "whole"))
    assert code == 0, err
    code, first, err = run_presk(*args, "--ckpt", str(tmp_path / "cut"), "--until", "17")
    assert code == 0, err
    assert (tmp_path / "cut" / "step_17.json").is_file()
    code, second, err = run_presk(*args, "--resume", str(tmp_path / "cut"))
    assert code == 0, err
    # The stopped run also prints its last step, 17.
    assert _steps(first)[-1].startswith("step 17 ")
    assert _steps(first)[:-1] + _steps(second) == _steps(whole)
    a = (tmp_path / "whole" / "final.psk.d").read_bytes()
    b = (tmp_path / "cut" / "final.psk.d").read_bytes()
    assert a == b
    log = (tmp_path / "cut" / "log.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in log] == list(range(1, 41))


def test_plot_draws_and_redraws(tmp_path: Path) -> None:
    png = tmp_path / "loss.png"
    code, _, err = run_presk(
        "train",
        TRAIN,
        "--steps",
        "12",
        "--ckpt",
        str(tmp_path / "c"),
        "--backend",
        "native",
        "--plot",
        str(png),
    )
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = tmp_path / "again.png"
    code, _out, err = run_presk("train", str(tmp_path / "c" / "log.jsonl"), "--plot", str(again))
    assert code == 0, err
    assert again.read_bytes()[:4] == b"\x89PNG"


def test_ctrl_c_checkpoints_and_stops(tmp_path: Path) -> None:
    env = {**os.environ, "NO_COLOR": "1"}
    cmd = [
        sys.executable,
        "-m",
        "presk.cli",
        "train",
        TRAIN,
        "--steps",
        "160",
        "--log-every",
        "1",
        "--ckpt",
        str(tmp_path / "c"),
    ]
    proc = subprocess.Popen(
        cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("step 1 "), first
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted after step" in err and "--resume" in err
    step = int(err.split("interrupted after step ")[1].split(";")[0])
    assert step < 160 and (tmp_path / "c" / f"step_{step}.json").is_file()
    code, _out, err = run_presk(
        "train",
        TRAIN,
        "--steps",
        "160",
        "--log-every",
        "1000",
        "--resume",
        str(tmp_path / "c"),
        "--until",
        str(step + 2),
    )
    assert code == 0, err


# ---------------------------------------------------------------- bad input


def _program(tmp_path: Path, data: str) -> Path:
    text = (REPO_ROOT / TRAIN).read_text().replace('"data/pairs.psk.d"', f'"{data}"')
    path = tmp_path / "t.psk"
    path.write_text(text.replace('"06_tower.psk"', f'"{REPO_ROOT / "tutorial/06_tower.psk"}"'))
    return path


def _pack(path: Path, type_text: str, lines: list[str]) -> None:
    text = path.with_suffix(".txt")
    text.write_text("".join(x + "\n" for x in lines))
    code, _, err = run_presk("data", "pack", str(text), "--type", type_text, "-o", str(path))
    assert code == 0, err


def test_bad_data_is_one_line(tmp_path: Path) -> None:
    _pack(tmp_path / "wrong.psk.d", "(ℝ[model: 3], ℝ[model: 4])", ["1 2 3 1 2 3 4"] * 20)
    _pack(tmp_path / "few.psk.d", "(ℝ[model: 4], ℝ[model: 4])", ["1 2 3 4 1 2 3 4"] * 5)
    cases = {
        "missing.psk.d": "no such data file",
        "wrong.psk.d": "the objective's sample is",
        "few.psk.d": "a batch of 8 is larger than the file's 5 samples",
    }
    for name, message in cases.items():
        code, _out, err = run_presk("train", str(_program(tmp_path, name)), "--steps", "2")
        assert code == 1 and message in err, (name, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_bad_checkpoints_are_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, _, err = run_presk("train", TRAIN, "--steps", "2", "--ckpt", str(blocker))
    assert code == 1 and "a file, not a directory" in err
    assert blocker.read_text() == "not a directory"
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_presk("train", TRAIN, "--resume", str(empty))
    assert code == 1 and "no checkpoint there" in err
    code, _, err = run_presk(
        "train", TRAIN, "--steps", "4", "--ckpt", str(tmp_path / "c"), "--backend", "native"
    )
    assert code == 0, err
    code, _, err = run_presk("train", TRAIN, "--resume", str(tmp_path / "c"))
    assert code == 1 and "the checkpoint's backend is native" in err
    (tmp_path / "c" / "step_4.json").write_text("{")
    code, _, err = run_presk("train", TRAIN, "--resume", str(tmp_path / "c"), "--backend", "native")
    assert code == 1 and "not a checkpoint presk can resume" in err
    assert "Traceback" not in err


def test_a_directory_of_someone_else_s_files_is_not_a_checkpoint_directory(
    tmp_path: Path,
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    files = {"log.jsonl": "precious\n", "final.psk.d": "mine", "step_5.json": "x"}
    for name, text in files.items():
        (mine / name).write_text(text)
    code, out, err = run_presk("train", TRAIN, "--steps", "2", "--ckpt", str(mine))
    assert (code, out) == (1, "") and "holds files presk did not write" in err
    assert {p.name: p.read_text() for p in mine.iterdir()} == files
    # presk's own directory is marked, and a later run writes into it again.
    ours = tmp_path / "ours"
    for _ in range(2):
        code, _, err = run_presk("train", TRAIN, "--steps", "2", "--ckpt", str(ours))
        assert code == 0, err
    assert (ours / checkpoint.MARKER).is_file()
    # A directory of checkpoints written before the marker is presk's too.
    (ours / checkpoint.MARKER).unlink()
    code, _, err = run_presk("train", TRAIN, "--steps", "4", "--resume", str(ours))
    assert code == 0, err


@pytest.mark.parametrize("plot", ["program", "log", "", "dir", "loss.txt"])
def test_a_plot_is_checked_before_the_run(tmp_path: Path, plot: str) -> None:
    program = tmp_path / "07_train.psk"
    program.write_bytes((REPO_ROOT / TRAIN).read_bytes())
    for other in ("data", "01_linear.psk", "02_norm.psk", "06_tower.psk"):
        (tmp_path / other).symlink_to(REPO_ROOT / "tutorial" / other)
    ckpt = tmp_path / "c"
    names = {"program": str(program), "log": str(ckpt / "log.jsonl"), "dir": str(tmp_path)}
    code, out, err = run_presk(
        "train", str(program), "--steps", "2", "--ckpt", str(ckpt),
        "--plot", names.get(plot, plot if not plot else str(tmp_path / plot)),
    )  # fmt: skip
    assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1, err
    assert program.read_bytes() == (REPO_ROOT / TRAIN).read_bytes()
    assert not ckpt.exists()


def test_train_refuses_a_file_without_a_run() -> None:
    code, _, err = run_presk("train", "tutorial/06_tower.psk")
    assert code == 2 and "has no `training run` block" in err


def test_a_checkpoint_cut_short_leaves_the_previous_one(tmp_path: Path) -> None:
    """A run killed between a checkpoint's files: its JSON, written last, is missing, so the
    step before stays the latest and resuming from it continues the run."""
    directory = tmp_path / "c"
    code, _, err = run_presk(
        "train",
        TRAIN,
        "--steps",
        "60",
        "--until",
        "50",
        "--ckpt",
        str(directory),
        "--backend",
        "native",
    )
    assert code == 0, err
    assert checkpoint.latest(str(directory)) == 50
    # What a kill after the weights but before the JSON of step 55 leaves behind.
    (directory / "step_55.psk.d").write_bytes((directory / "step_50.psk.d").read_bytes())
    (directory / ".step_55.json.123.tmp").write_text('{"step": 5')
    assert checkpoint.latest(str(directory)) == 50
    code, out, err = run_presk(
        "train",
        TRAIN,
        "--steps",
        "60",
        "--log-every",
        "5",
        "--resume",
        str(directory),
        "--backend",
        "native",
    )
    assert code == 0, err
    assert _steps(out)[0].startswith("step 55 ")


def test_a_checkpoint_directory_that_cannot_be_read_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from presk.diagnostics import CommandError

    def refuse(self: Path):  # type: ignore[no-untyped-def]
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", refuse)  # as for a directory of mode 000 (not root)
    with pytest.raises(CommandError, match="Permission denied"):
        checkpoint.check(str(tmp_path))


def test_a_horizon_past_the_step_counter_is_refused_before_any_work(tmp_path: Path) -> None:
    ckpt = tmp_path / "c"
    huge = ("--epochs", "10000000000000000000")
    code, out, err = run_presk("train", TRAIN, *huge, "--until", "1", "--ckpt", str(ckpt))
    assert (code, out) == (2, "") and "2^53" in err and not ckpt.exists()
    code, out, err = run_presk("export", TRAIN, "--target", "c", "--train", *huge,
                               "-o", str(tmp_path / "e"))  # fmt: skip
    assert (code, out) == (2, "") and "2^53" in err and not (tmp_path / "e").exists()


@pytest.mark.parametrize(
    ("key", "value"),
    [("total", "1e3"), ("total", "true"), ("total", "100000000000000000000000"), ("total", "2"),
     ("seed", "0.0"), ("bits", "true")],
)  # fmt: skip
def test_a_checkpoint_s_counts_are_whole_and_in_order(
    tmp_path: Path, key: str, value: str
) -> None:
    ckpt = tmp_path / "c"
    code, _, err = run_presk("train", TRAIN, "--steps", "10", "--until", "4", "--ckpt", str(ckpt))
    assert code == 0, err
    doc = json.loads((ckpt / "step_4.json").read_text())
    doc[key] = json.loads(value)
    (ckpt / "step_4.json").write_text(json.dumps(doc))
    code, _, err = run_presk("train", TRAIN, "--resume", str(ckpt))
    assert code == 1 and one_line_err(err) and "step_4.json" in err, err


def one_line_err(err: str) -> bool:
    return err.count("\n") == 1 and "Traceback" not in err
