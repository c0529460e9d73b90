"""The PyTorch export's draws: `presk_random.py` is presk's generator (keys, integer and
uniform streams bit for bit, normals and Xavier draws to a few ulps), and the exports of
dropout in training, `sample`, `M.init`, a module's θ, `merge`/`split` and one AdamW step
(`run.step`) pass their conformance tests against the 256-bit reference; a corrupted
stream or step fails them."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from presk.export.pytorch.random_text import RANDOM
from presk.interp import rng

ROOT = Path(__file__).resolve().parent.parent
PRESK = str(Path(sys.executable).parent / "presk")
SOURCE = "tests/export_pytorch/draws.psk"
TRAIN = "tutorial/07_train.psk"
ENV = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}

torch = pytest.importorskip("torch", reason="torch is needed to run the exported code")

# Entry and its --dim flags: dropout in training mode (with the module's θ init test),
# sampling, M.init, dropout under grad of a fresh tree, merge and split.
# And one optimizer step of the tutorial's training run (presk's generated run.step).
ENTRIES = {
    "noisy": [SOURCE, "Net.noisy", "--dim", "batch=16"],
    "pick": [SOURCE, "pick", "--dim", "B=64"],
    "fresh": [SOURCE, "fresh"],
    "fresh_grad": [SOURCE, "fresh_grad", "--dim", "B=3"],
    "regroup": [SOURCE, "regroup", "--dim", "B=2"],
    "run_step": [TRAIN, "run.step", "--dim", "B=8"],
}

# Runs each export's test functions in one interpreter (one torch import), each directory
# with its own modules; prints `name: ok` or `name: FAILED …`.
RUNNER = """
import importlib.util, sys, traceback
for name in sys.argv[1:]:
    for mod, module in list(sys.modules.items()):  # the previous directory's modules
        if (getattr(module, "__file__", None) or "").startswith(tuple(sys.argv[1:])):
            del sys.modules[mod]
    sys.path.insert(0, name)
    try:
        path = name + "/test_conformance.py"
        spec = importlib.util.spec_from_file_location("test_conformance", path)
        test = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(test)
        for fn in [getattr(test, f) for f in dir(test) if f.startswith("test_")]:
            fn()
        print(name + ": ok")
    except Exception:
        print(name + ": FAILED " + traceback.format_exc().splitlines()[-1])
    sys.path.remove(name)
"""


@pytest.fixture(scope="module")
def helper(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    path = tmp_path_factory.mktemp("helper") / "presk_random.py"
    path.write_text(RANDOM, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("presk_random_copy", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_keys_and_integer_streams_are_presks(helper: ModuleType) -> None:
    for seed in (0, 1, 42, 2**64 - 1):
        for path in ("theta/proj.w", "input/key", "σ²/ü"):
            key = rng.key_for(seed, path)
            assert helper.key_for(seed, path) == (key.k0, key.k1)
            assert (helper.u64((key.k0, key.k1), 1001) == rng.u64_array(key, 1001)).all()
            got = helper.uniforms((key.k0, key.k1), (7, 3)).numpy().reshape(-1)
            assert (got == rng.uniforms_array(key, 21)).all()
    assert helper.key_from_seed(0) == (0x0101FF59, 0xA4E54F39)  # docs/rng.md's vector


def test_real_draws_agree_to_a_few_ulps(helper: ModuleType) -> None:
    key = rng.key_for(42, "theta/proj.w")
    pair = (key.k0, key.k1)
    assert helper.normals(pair, 3).tolist() == pytest.approx(
        [0.1476777772029313, -1.241743218188582, -1.7291438717249072], rel=1e-15
    )
    want = rng.normals_array(key, 4001)
    assert np.abs(helper.normals(pair, 4001) - want).max() <= 4 * np.spacing(np.abs(want)).max()
    for shape, fans in (((6, 5), (6, 5)), ((9,), (9, 9)), ((2, 3, 4), (3, 4))):
        got = helper.draw(pair, shape, ("xavier_uniform",)).numpy().reshape(-1)
        assert np.allclose(got, rng.xavier_uniform_array(key, got.size, *fans), 0, 1e-15)
    scaled = helper.draw(pair, (50,), ("normal", 0.02)).numpy()
    assert np.allclose(scaled, rng.scaled_normals_array(key, 50, 0.02), 1e-15, 0)


def _export(out: Path, entry: list[str]) -> None:
    argv = [PRESK, "export", entry[0], "--target", "pytorch", "--mode", "readable"]
    done = subprocess.run(
        [*argv, "--conformance-entry", *entry[1:], "-o", str(out)],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def _run(dirs: list[Path]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, *map(str, dirs)],
        capture_output=True, text=True, check=False, env=ENV,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_draws_pass_their_conformance_tests(tmp_path: Path) -> None:
    dirs = []
    for name, entry in ENTRIES.items():
        _export(tmp_path / name, entry)
        dirs.append(tmp_path / name)
    text = (tmp_path / "noisy" / "draws.py").read_text(encoding="utf-8")
    assert "presk_random.dropout(key, 0.2, _stack0)" in text
    assert '("layers.w", "layers.{}.w", ("xavier_uniform",)),' in text
    assert "x.unflatten(1, (2, 2))" in text and "x.flatten(-2, -1)" in text
    assert "def test_presk_init():" in (tmp_path / "noisy" / "test_conformance.py").read_text()
    text = (tmp_path / "run_step" / "_07_train.py").read_text(encoding="utf-8")
    assert "def adamw_step(θ, m, v, g, t, lr):" in text and "torch.func.grad_and_value" in text
    # A copy whose stream starts one block late: every test that draws fails.
    for name in ("noisy", "pick", "fresh"):
        bad = tmp_path / f"{name}_shifted"
        bad.mkdir()
        for source in (tmp_path / name).rglob("*"):
            if source.is_file():
                target = bad / source.relative_to(tmp_path / name)
                target.parent.mkdir(exist_ok=True)
                target.write_bytes(source.read_bytes())
        helper = bad / "presk_random.py"
        text = helper.read_text(encoding="utf-8")
        start = "i = np.arange((n + 1) // 2, dtype=np.uint64)"
        assert start in text
        helper.write_text(text.replace(start, start.replace("(n + 1)", "1, 1 + (n + 1)")))
        dirs.append(bad)
    bad = tmp_path / "run_step_moved"  # an update a millionth too long fails
    _export(bad, ENTRIES["run_step"])
    model = bad / "_07_train.py"
    text = model.read_text(encoding="utf-8")
    model.write_text(text.replace("new_θ[name] = x - step", "new_θ[name] = x - 1.000001 * step"))
    dirs.append(bad)
    lines = _run(dirs)
    assert len(lines) == len(dirs)
    assert lines[: len(ENTRIES)] == [f"{d}: ok" for d in dirs[: len(ENTRIES)]]
    assert all(": FAILED" in line for line in lines[len(ENTRIES) :]), lines


def test_a_construct_still_unsupported_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "u"
    argv = [PRESK, "export", "tests/export_pytorch/unsupported.psk", "--target", "pytorch"]
    done = subprocess.run(
        [*argv, "--mode", "readable", "-o", str(out)],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "presk export: cannot export to PyTorch yet: a call of `Scale.twice` on these parameters\n"
    )
    assert not out.exists()
