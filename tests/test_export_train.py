"""`presk export --target c --train`: a C program that trains as `presk train --backend native`.

The exported trainer must print the same log lines and write the same checkpoint bytes as
`presk train --backend native` for the same steps, pass its own `make check`, and write
checkpoints that `presk train --resume` continues to the bit. Bad input is one line.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_presk

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

TUTORIAL = "tutorial/07_train.psk"


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def one_line(text: str) -> bool:
    return text.endswith("\n") and text.count("\n") == 1


def export(out: Path, *flags: str, source: str = TUTORIAL) -> str:
    code, stdout, err = run_presk("export", source, "--target", "c", "--train", *flags,
                                  "-o", str(out))  # fmt: skip
    assert (code, err) == (0, ""), err
    # With OpenMP and -Wall -Wextra, as make c-conformance builds it: model.c's private copy
    # of the libm is compiled in the trainer's unit, where it must not warn either.
    built = subprocess.run(["make", "-s", "-C", str(out), "OPENMP=-fopenmp", "train"],
                           check=True, capture_output=True, text=True)  # fmt: skip
    assert "warning" not in built.stderr, built.stderr
    return stdout


def train_c(out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(out / "train"), *flags], capture_output=True, text=True, check=False)


def steps(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("step ")]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export_train") / "tower"
    summary = export(out)
    assert summary.startswith("presk export: the training run of Tower (")
    assert "160 steps of 8 samples" in summary and "compares 20 steps" in summary
    return out


def test_twenty_steps_are_presk_trains_byte_for_byte(exported: Path, tmp_path: Path) -> None:
    mine, theirs = tmp_path / "c", tmp_path / "native"
    done = train_c(exported, "--steps", "20", "--log-every", "3", "--ckpt", str(mine))
    assert done.returncode == 0, done.stderr
    code, stdout, err = run_presk("train", TUTORIAL, "--backend", "native", "--steps", "20",
                                  "--log-every", "3", "--ckpt", str(theirs))  # fmt: skip
    assert code == 0, err
    assert steps(done.stdout) == steps(stdout)
    assert [s.split()[1] for s in steps(done.stdout)] == ["3", "6", "9", "12", "15", "18", "20"]
    for name in ("final.psk.d", "step_20.psk.d", "step_20.state.psk.d", "step_20.json"):
        assert (mine / name).read_bytes() == (theirs / name).read_bytes(), name
    last = done.stdout.splitlines()[-1]
    loss = steps(done.stdout)[-1].split()[5]
    assert last == f"train: 20 steps of Tower, final loss {loss}, weights in {mine}/final.psk.d"


def test_make_check_passes(exported: Path) -> None:
    done = subprocess.run(["make", "-s", "-C", str(exported), "check"], capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "20 steps: the log lines and final.psk.d are presk train --backend native's" in (
        done.stdout
    )


def test_make_check_fails_on_other_bits(tmp_path: Path) -> None:
    out = tmp_path / "e"
    export(out)
    final = out / "conformance" / "final.psk.d"
    data = bytearray(final.read_bytes())
    data[-9] ^= 1  # a bit of the last weight (the checksum's 8 bytes follow it)
    final.write_bytes(bytes(data))
    done = subprocess.run(["make", "-s", "-C", str(out), "check"], capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode != 0 and "final.psk.d differs" in done.stderr


def test_presk_train_resumes_a_c_checkpoint_to_the_bit(exported: Path, tmp_path: Path) -> None:
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert train_c(exported, "--steps", "100", "--ckpt", str(whole)).returncode == 0
    done = train_c(exported, "--steps", "100", "--ckpt", str(cut))
    assert done.returncode == 0
    for name in ("final.psk.d", "step_100.psk.d", "step_100.state.psk.d", "step_100.json"):
        (cut / name).unlink()  # left: the checkpoint of step 50 (`checkpoint every 50 steps`)
    code, stdout, err = run_presk("train", TUTORIAL, "--backend", "native", "--resume", str(cut))
    assert code == 0, err
    assert steps(stdout)[-1] == steps(done.stdout)[-1]
    assert (cut / "final.psk.d").read_bytes() == (whole / "final.psk.d").read_bytes()


@pytest.mark.parametrize("realize", ["f32", "bf16"])
def test_other_realizations_pass_their_check(tmp_path: Path, realize: str) -> None:
    out = tmp_path / "e"
    export(out, "--realize", realize, "--threads", "2", source="tests/train/regression.psk")
    done = subprocess.run(["make", "-s", "-C", str(out), "check"], capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_the_horizon_flags(tmp_path: Path) -> None:
    out = tmp_path / "e"
    export(out, "--steps", "7", "--epochs", "1", "--seed", "5")
    done = train_c(out, "--ckpt", str(tmp_path / "a"), "--log-every", "100")
    assert steps(done.stdout) == [steps(done.stdout)[0]] and done.stdout.startswith("step 7 ")
    # The data allows 16 steps an epoch; presk train caps a horizon as the trainer does.
    capped = train_c(out, "--steps", "1000", "--ckpt", str(tmp_path / "b"), "--log-every", "100")
    assert capped.stdout.startswith("step 16  epoch 1 ")
    code, stdout, _ = run_presk("train", TUTORIAL, "--backend", "native", "--epochs", "1",
                                "--steps", "7", "--seed", "5", "--log-every", "100",
                                "--ckpt", str(tmp_path / "native"))  # fmt: skip
    assert code == 0 and steps(stdout) == steps(done.stdout)


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--steps", "0"], "--steps 0: expected a positive integer"),
        (["--log-every", "x"], "--log-every x: expected a positive integer"),
        (["--steps"], "--steps: expected a value"),
        (["--ckpt", ""], '--ckpt "": name a file'),
    ],
)
def test_bad_trainer_flags_are_one_line(exported: Path, flags: list[str], needle: str) -> None:
    done = train_c(exported, *flags)
    assert done.returncode == 2 and done.stdout == ""
    assert one_line(done.stderr) and needle in done.stderr


def test_times_holds_each_step(exported: Path, tmp_path: Path) -> None:
    times = tmp_path / "times"
    done = train_c(exported, "--steps", "5", "--ckpt", str(tmp_path / "c"), "--times", str(times))
    assert done.returncode == 0
    assert len([float(x) for x in times.read_text().split()]) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "times"]  # no temporary left
    # A directory is refused before the first step, not after the run.
    done = train_c(exported, "--steps", "5", "--ckpt", str(tmp_path / "d"), "--times",
                   str(tmp_path))  # fmt: skip
    assert done.returncode == 1 and "a directory" in done.stderr and "step " not in done.stdout
    assert not (tmp_path / "d").exists()


def test_an_unknown_trainer_flag_gives_the_usage(exported: Path) -> None:
    done = train_c(exported, "--bogus")
    assert done.returncode == 2 and "--bogus: unknown flag" in done.stderr
    usage = "usage: train [--steps N] [--log-every K] [--ckpt DIR] [--times FILE]\n"
    assert done.stderr.endswith(usage)


def test_a_checkpoint_directory_that_is_a_file_is_one_line(exported: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    done = train_c(exported, "--steps", "2", "--ckpt", str(blocker / "sub"))
    assert done.returncode == 1 and one_line(done.stderr) and done.stderr.startswith("train: ")


def test_the_checkpoint_directory_is_the_program_s_own(exported: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "final.psk.d").write_text("my weights")
    done = train_c(exported, "--steps", "2", "--ckpt", str(mine))
    assert done.returncode == 1 and one_line(done.stderr) and "did not write" in done.stderr
    assert [p.name for p in mine.iterdir()] == ["final.psk.d"]
    assert (mine / "final.psk.d").read_text() == "my weights"
    ours = tmp_path / "ours"
    for _ in range(2):  # marked by the first run, written again by the second
        done = train_c(exported, "--steps", "2", "--ckpt", str(ours))
        assert done.returncode == 0, done.stderr
    assert (ours / ".presk-ckpt").is_file()
    # presk train takes it as its own: --resume continues there.
    code, _, err = run_presk("train", TUTORIAL, "--backend", "native", "--steps", "4",
                             "--resume", str(ours))  # fmt: skip
    assert code == 0, err


@pytest.mark.parametrize(
    ("argv", "code", "needle"),
    [
        (["tutorial/06_tower.psk"], 2, "has no `training run` block"),
        ([TUTORIAL, "--entry", "loss"], 2, "drop --entry and --dim"),
        ([TUTORIAL, "--mode", "scop"], 2, "drop --mode and --name"),
        ([TUTORIAL, "--steps", "0"], 2, "--steps"),
        ([TUTORIAL, "--seed", "-1"], 2, "--seed"),
        ([TUTORIAL, "--serve"], 2, "one program at a time"),
    ],
)
def test_bad_exports_are_one_line(tmp_path: Path, argv: list[str], code: int, needle: str) -> None:
    got, out, err = run_presk("export", *argv, "--target", "c", "--train", "-o",
                              str(tmp_path / "e"))  # fmt: skip
    assert (got, out) == (code, "") and one_line(err) and needle in err, err
    assert not (tmp_path / "e").exists()


def test_flags_of_train_without_it_are_one_line(tmp_path: Path) -> None:
    code, out, err = run_presk("export", TUTORIAL, "--entry", "loss", "--steps", "3", "-o",
                               str(tmp_path / "e"))  # fmt: skip
    assert (code, out) == (2, "") and one_line(err) and "--steps is a flag of --train" in err


def test_a_directory_that_is_not_an_export_is_refused(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    code, out, err = run_presk("export", TUTORIAL, "--target", "c", "--train", "-o", str(mine))
    assert (code, out) == (1, "") and one_line(err) and "is not a presk export" in err
    assert (mine / "notes.txt").read_text() == "keep me"


# The step runs its forward pass once, so its forward dot is `Linear.apply.fwd`'s.
PLAN = {"layout": {"Linear.apply.fwd/%3": {"tile": [2, 4], "lanes": 4}}}


def _plan(tmp_path: Path, doc: object) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return f"@{path}"


def test_a_plan_lays_out_the_step_and_keeps_its_bits(exported: Path, tmp_path: Path) -> None:
    plan, out = _plan(tmp_path, PLAN), tmp_path / "planned"
    summary = export(out, "--plan", plan)
    assert summary.rstrip().endswith(f"20 steps with presk train --backend native --plan {plan}")
    kernels = (out / "kernels.c").read_text()
    assert "<v=" in kernels and kernels != (exported / "kernels.c").read_text()
    assert "`Linear.apply.fwd/%3`" in (out / "README.md").read_text()
    # Every point computes point zero's bits: the run `make check` repeats is the plain one.
    for name in ("native.log", "final.psk.d"):
        planned, plain = out / "conformance" / name, exported / "conformance" / name
        assert planned.read_bytes() == plain.read_bytes(), name
    done = subprocess.run(["make", "-s", "-C", str(out), "check"], capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"are presk train --backend native --plan {plan}'s, byte for byte" in done.stdout


@pytest.mark.parametrize(
    ("layout", "needle"),
    [
        # The step has no `Linear.apply`: gradients run the forward pass as `….fwd`.
        ({"Linear.apply/%3": {"tile": [2, 4]}}, "names `Linear.apply/%3`, which is no nest of"),
        ({"Linear.apply.fwd/%3": {"tile": [2, 4], "lanes": 3}}, "E7002"),
    ],
)
def test_a_plan_the_step_cannot_take_is_one_line(
    tmp_path: Path, layout: object, needle: str
) -> None:
    plan = _plan(tmp_path, {"layout": layout})
    code, out, err = run_presk("export", TUTORIAL, "--target", "c", "--train", "--plan", plan,
                               "-o", str(tmp_path / "e"))  # fmt: skip
    assert (code, out) == (1, "") and one_line(err) and needle in err, err
    assert not (tmp_path / "e").exists()
