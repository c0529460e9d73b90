"""The Python API: docs/python.md's examples, threads, torch tensors, errors."""

from __future__ import annotations

import doctest
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO_ROOT

import presk
import presk.data

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")


@pytest.fixture(autouse=True)
def _at_root(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.chdir(REPO_ROOT)


def test_the_examples_of_docs_python_md_run() -> None:
    result = doctest.testfile(
        str(REPO_ROOT / "docs" / "python.md"), module_relative=False, verbose=False
    )
    assert result.attempted > 20
    assert result.failed == 0


def test_an_entry_called_from_four_threads() -> None:
    prog = presk.load("tutorial/03_attention.psk")
    attend = prog.entry("attend", dims={"B": 2, "T": 16}, threads=1)
    draws = [attend.inputs(seed=s) for s in range(4)]
    expected = [attend(*d) for d in draws]
    got: list[list[np.ndarray]] = [[] for _ in range(4)]

    def work(i: int) -> None:
        for _ in range(25):
            got[i].append(attend(*draws[i]))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        assert len(got[i]) == 25
        assert all(np.array_equal(g, expected[i]) for g in got[i])


def test_torch_tensors_are_arguments() -> None:
    torch = pytest.importorskip("torch")
    prog = presk.load("tutorial/01_linear.psk")
    linear = prog.entry("Linear{3, 2}.apply", dims={"batch": 4})
    theta, x = linear.inputs()
    as_torch = {k: torch.from_numpy(v) for k, v in theta.items()}
    assert np.array_equal(linear(as_torch, torch.from_numpy(x)), linear(theta, x))


def test_the_native_entry_gives_presk_run_s_numbers() -> None:
    from conftest import run_presk

    prog = presk.load("tutorial/02_norm.psk")
    norm = prog.entry("RMSNorm{4}.apply", dims={"batch": 2})
    out = norm(*norm.inputs(seed=3))
    code, printed, _ = run_presk(
        "run", "tutorial/02_norm.psk", "--entry", "RMSNorm{4}.apply", "--dim", "batch=2",
        "--backend", "native", "--seed", "3", "--json",
    )  # fmt: skip
    import json

    assert code == 0
    data = json.loads(printed)["output"]["data"]
    assert np.array_equal(np.array(data, dtype=float), out)


def test_consts_change_the_program() -> None:
    small = presk.load("tutorial/03_attention.psk", consts={"H": 1})
    attend = small.entry("attend", dims={"B": 1, "T": 2})
    q, _, _ = attend.inputs()
    assert q.shape[1] == 1  # one head


def test_errors_are_the_api_s_own() -> None:
    prog = presk.load("tutorial/01_linear.psk")
    with pytest.raises(presk.UsageError, match="no function"):
        prog.entry("nope")
    with pytest.raises(presk.UsageError, match="backend"):
        prog.entry("Linear{3, 2}.apply", dims={"batch": 1}, backend="gpu")
    with pytest.raises(presk.UsageError, match="threads"):
        prog.entry("Linear{3, 2}.apply", dims={"batch": 1}, threads=0)
    with pytest.raises(presk.NotBuiltYet):
        prog.entry("Linear{3, 2}.apply", dims={"batch": 1}, plan={})
    with pytest.raises(presk.UsageError, match="not a number"):
        presk.load("tutorial/01_linear.psk", consts={"N": "x"})
    with pytest.raises(presk.UsageError):
        presk.load("no/such/file.psk")


def test_a_run_time_failure_is_raised_as_such(tmp_path: Path) -> None:
    src = tmp_path / "huge.psk"
    src.write_text("dim B\nfn f(x : ℝ[B]) -> ℝ[B] = x * 2\n")
    prog = presk.load(src)
    with pytest.raises(presk.RuntimeFailure, match="needs"):
        prog.entry("f", dims={"B": 10**13})


def test_data_files_round_trip_through_the_api(tmp_path: Path) -> None:
    path = tmp_path / "trees.psk.d"
    samples = [(np.arange(6.0).reshape(2, 3) * i, np.array([i, i + 1])) for i in range(4)]
    presk.data.write(path, samples, type="(ℝ[2, 3], idx[8][2])", real="f32")
    back = presk.data.read(path)
    assert len(back) == 4
    assert np.array_equal(back[3][0], samples[3][0])
    assert back.arrays["1"].dtype == np.int64
    with pytest.raises(ValueError, match="do not match"):
        presk.data.write(
            path, [{"w": s[0], "ids": s[1]} for s in samples], type="(ℝ[2, 3], idx[8][2])"
        )
    with pytest.raises(ValueError):
        presk.data.write(path, [np.zeros(3), np.zeros(4)], type="ℝ[3]")
    assert os.path.exists(path)


def test_dlpack_only_arrays_are_arguments() -> None:
    class OnlyDLPack:
        """An array of another library that speaks DLPack and nothing else."""

        def __init__(self, array: np.ndarray) -> None:
            self._array = array

        def __dlpack__(self, **kwargs: object) -> object:
            return self._array.__dlpack__(**kwargs)

        def __dlpack_device__(self) -> tuple[int, int]:
            return self._array.__dlpack_device__()

    prog = presk.load("tutorial/01_linear.psk")
    linear = prog.entry("Linear{3, 2}.apply", dims={"batch": 4})
    theta, x = linear.inputs()
    assert np.array_equal(linear(theta, OnlyDLPack(x)), linear(theta, x))
