"""`presk export --target c`: the standalone program trusts no byte of its inputs file.

The entry reads its inputs without bounds checks, so `main.c` checks every input leaf's
element type, rank and dims against the export's, and every index leaf's values against
its `idx[N]` bound, before the entry runs. A file that fails, or a bad `-r`, is one line on
stderr and a non-zero exit: never a crash, and no output file.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO_ROOT, run_presk

from presk.data.format import DataFile, Leaf, read, write

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

MINIGPT = REPO_ROOT / "tests/examples/minigpt/minigpt.psk"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny MiniGPT exported and built: its directory (`model`, `conformance/inputs.psk.d`)."""
    base = tmp_path_factory.mktemp("cin")
    out = base / "m"
    code, _, err = run_presk(
        "export", str(MINIGPT), "--const", "V=64", "--const", "D=16", "--const", "H=2",
        "--const", "L=2", "--target", "c", "--entry", "MiniGPT.apply", "--dim", "B=1",
        "--dim", "T=4", "-o", str(out),
    )
    assert code == 0, err
    build = subprocess.run(["make", "-s", "-C", str(out), "model"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    assert "warning" not in build.stderr
    return out


def _inputs(model: Path) -> DataFile:
    return read(model / "conformance/inputs.psk.d")


def _leaf(data: DataFile, path: str) -> int:
    return [leaf.path for leaf in data.leaves].index(path)


Done = subprocess.CompletedProcess[str]


def _run(model: Path, tmp_path: Path, inputs: Path, *flags: str) -> tuple[Done, Path]:
    out = tmp_path / "out.psk.d"
    done = subprocess.run(
        [str(model / "model"), *flags, str(inputs), str(out)],
        capture_output=True, text=True, timeout=120,
    )
    return done, out


def _refused(done: Done, out: Path, *words: str) -> None:
    assert done.returncode > 0, (done.returncode, done.stderr)  # not a signal, not success
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    assert done.stdout == ""
    assert not out.exists()
    assert not list(out.parent.glob("out.psk.d*"))  # no temporary either


def _with_id(model: Path, tmp_path: Path, value: int) -> Path:
    data = _inputs(model)
    arrays = [a.copy() for a in data.arrays]
    arrays[_leaf(data, "ids")].reshape(-1)[1] = value
    path = tmp_path / "bad.psk.d"
    write(path, DataFile(data.type, data.count, list(data.leaves), arrays))
    return path


def test_the_conformance_inputs_still_run(model: Path, tmp_path: Path) -> None:
    done, out = _run(model, tmp_path, model / "conformance/inputs.psk.d")
    assert done.returncode == 0, done.stderr
    assert out.is_file()


@pytest.mark.parametrize("value", [10**12, 64, -1, -(2**63)])
def test_an_index_out_of_range_is_one_line(model: Path, tmp_path: Path, value: int) -> None:
    done, out = _run(model, tmp_path, _with_id(model, tmp_path, value))
    _refused(done, out, "`ids`", str(value), "idx[64]")


def test_the_largest_index_in_range_runs(model: Path, tmp_path: Path) -> None:
    done, out = _run(model, tmp_path, _with_id(model, tmp_path, 63))
    assert done.returncode == 0, done.stderr
    assert out.is_file()


@pytest.mark.parametrize("shape", [(1, 16), (64, 16, 1), (64,), (16, 64)])
def test_a_leaf_of_another_shape_is_one_line(
    model: Path, tmp_path: Path, shape: tuple[int, ...]
) -> None:
    data = _inputs(model)
    i = _leaf(data, "theta_tok_table")
    leaves, arrays = list(data.leaves), list(data.arrays)
    leaves[i] = Leaf(leaves[i].path, leaves[i].dtype, shape)
    arrays[i] = np.zeros((1, *shape))
    bad = tmp_path / "bad.psk.d"
    write(bad, DataFile(data.type, data.count, leaves, arrays))
    done, out = _run(model, tmp_path, bad)
    _refused(done, out, "`theta_tok_table`", "[64, 16]")


def test_ids_of_another_shape_are_one_line(model: Path, tmp_path: Path) -> None:
    data = _inputs(model)
    i = _leaf(data, "ids")
    leaves, arrays = list(data.leaves), list(data.arrays)
    leaves[i] = Leaf("ids", "i64", (1, 4000))
    arrays[i] = np.zeros((1, 1, 4000), dtype=np.int64)
    bad = tmp_path / "bad.psk.d"
    write(bad, DataFile(data.type, data.count, leaves, arrays))
    done, out = _run(model, tmp_path, bad)
    _refused(done, out, "`ids`", "[1, 4]")


@pytest.mark.parametrize(
    "repeat", ["5abc", "", "0", "-3", " 5", "2305843009213693952", "99999999999999999999999"]
)
def test_a_bad_repeat_is_one_line_and_exit_2(model: Path, tmp_path: Path, repeat: str) -> None:
    done, out = _run(model, tmp_path, model / "conformance/inputs.psk.d", "-r", repeat)
    assert done.returncode == 2, (done.returncode, done.stderr)
    _refused(done, out, "-r")


def test_a_good_repeat_times_the_calls(model: Path, tmp_path: Path) -> None:
    done, _ = _run(model, tmp_path, model / "conformance/inputs.psk.d", "-r", "3")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("presk_MiniGPT_apply: 3 calls, median ")


TRAIN_MINIGPT = REPO_ROOT / "tests/examples/minigpt/train_minigpt.psk"


@pytest.fixture(scope="module")
def trainer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny MiniGPT training run exported with --train and built."""
    out = tmp_path_factory.mktemp("cin_train") / "t"
    code, _, err = run_presk(
        "export", str(TRAIN_MINIGPT), "--const", "V=64", "--const", "D=16", "--const", "H=2",
        "--const", "L=2", "--target", "c", "--train", "-o", str(out),
    )
    assert code == 0, err
    build = subprocess.run(["make", "-s", "-C", str(out), "train"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    assert "warning" not in build.stderr
    return out


def _train_with(trainer: Path, tmp_path: Path, name: str, change: str) -> tuple[Done, Path]:
    """Run a copy of the training program whose `name` (theta0/data) has been changed."""
    copy = tmp_path / "t"
    shutil.copytree(trainer, copy)
    data = read(copy / name)
    leaves, arrays = list(data.leaves), [a.copy() for a in data.arrays]
    if change == "shape":
        leaves[0] = Leaf(leaves[0].path, leaves[0].dtype, (1, 16))
        arrays[0] = np.zeros((data.count, 1, 16), dtype=arrays[0].dtype)
    else:
        arrays[-1].reshape(-1)[5] = int(change)
    write(copy / name, DataFile(data.type, data.count, leaves, arrays))
    ckpt = tmp_path / "ckpt"
    done = subprocess.run([str(copy / "train"), "--steps", "2", "--ckpt", str(ckpt)],
                          capture_output=True, text=True, timeout=120)
    return done, ckpt


@pytest.mark.parametrize("value", ["1000000000000", "-1", "64"])
def test_train_refuses_token_ids_out_of_range(trainer: Path, tmp_path: Path, value: str) -> None:
    done, ckpt = _train_with(trainer, tmp_path, "data.psk.d", value)
    assert done.returncode > 0, (done.returncode, done.stderr)
    assert done.stderr.count("\n") == 1 and "data.psk.d" in done.stderr, done.stderr
    assert f"index {value} out of range for idx[64]" in done.stderr
    assert not ckpt.exists()


@pytest.mark.parametrize("name", ["theta0.psk.d", "data.psk.d"])
def test_train_refuses_leaves_of_another_shape(trainer: Path, tmp_path: Path, name: str) -> None:
    done, ckpt = _train_with(trainer, tmp_path, name, "shape")
    assert done.returncode > 0, (done.returncode, done.stderr)
    assert done.stderr.count("\n") == 1 and name in done.stderr, done.stderr
    assert not ckpt.exists()


LIBRARY_CALL = r"""
#include <stdio.h>
#include <stdlib.h>
#include "minigpt.h"

static double zeros[1 << 16];
static double result[1 << 12];

int main(int argc, char **argv) {
    int64_t ids[4] = {1, 2, 3, 4};
    ids[1] = strtoll(argv[argc - 1], NULL, 10);
    minigpt_in in;
    minigpt_out out;
%(fields)s
    in.ids = ids;
    out.out = result;
    result[0] = 7.0;
    minigpt_ctx *ctx = minigpt_create();
    int status = minigpt_call(ctx, &in, &out);
    minigpt_destroy(ctx);
    printf("%%d %%g\n", status, result[0]);
    return 0;
}
"""


@pytest.fixture(scope="module")
def library_call(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny MiniGPT exported as a library, and a program that calls it with ids[1] = argv[1]."""
    out = tmp_path_factory.mktemp("cin_lib") / "lib"
    code, _, err = run_presk(
        "export", str(MINIGPT), "--const", "V=64", "--const", "D=16", "--const", "H=2",
        "--const", "L=2", "--mode", "library", "--entry", "MiniGPT.apply", "--dim", "B=1",
        "--dim", "T=4", "-o", str(out),
    )
    assert code == 0, err
    build = subprocess.run(["make", "-s", "-C", str(out)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    header = (out / "minigpt.h").read_text()
    block = header.split("} minigpt_key;", 1)[1].split("} minigpt_in;", 1)[0]
    names = [line.split("*", 1)[1].split(";", 1)[0] for line in block.splitlines()
             if line.strip().startswith("const double *")]
    fields = "\n".join(f"    in.{name} = zeros;" for name in names)
    (out / "call.c").write_text(LIBRARY_CALL % {"fields": fields})
    cc = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-I.", "-o", "call", "call.c",
                         "libminigpt.a", "-lm"], cwd=out, capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    return out / "call"


@pytest.mark.parametrize(("value", "status"), [("63", "0"), ("64", "3"), ("-1", "3"),
                                                 ("1000000000000", "3")])
def test_the_library_refuses_indices_out_of_range(
    library_call: Path, value: str, status: str
) -> None:
    done = subprocess.run([str(library_call), value], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (done.returncode, done.stderr)
    got, first = done.stdout.split()
    assert got == status
    if status == "3":
        assert first == "7"  # nothing was computed
