"""Exports run the exact reference only within a budget of estimated operations.

A small entry still writes its reference; over a budget (lowered here through
PRESK_REFERENCE_BUDGET) the C export skips it with one line, writes no
`reference.psk.d`, and its `make check` still passes against the native bits;
`--reference` forces it, `--no-reference` skips it. The PyTorch conformance
test, which is nothing without the reference, is refused over the budget.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO_ROOT, run_presk

from presk.entries import bind_dims, find_entry
from presk.export.budget import BUDGET_VARIABLE, DEFAULT_BUDGET, reference_ops
from presk.host.realization import Realization
from presk.pipeline import Request, front_end, run_back_end

ATTEND = ("tutorial/03_attention.psk", "--target", "c", "--entry", "attend",
          "--dim", "B=1", "--dim", "T=3")  # fmt: skip
PRESK = str(REPO_ROOT / ".venv" / "bin" / "presk")


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.delenv(BUDGET_VARIABLE, raising=False)


def _ops(path: str, entry: str, dims: dict[str, int]) -> int:
    checked, _ = front_end(path, {})
    chosen = find_entry(checked, entry)
    binding = bind_dims(chosen, {k: str(v) for k, v in dims.items()})
    request = Request(checked, chosen, binding, Realization("f64"))
    host = run_back_end(request, until="record").host
    assert host is not None
    return reference_ops(host)


def test_the_estimate_covers_the_multiply_adds_and_grows_with_the_shapes() -> None:
    linear = _ops("tutorial/01_linear.psk", "Linear{3, 2}.apply", {"batch": 4})
    assert linear >= 4 * 2 * 3 * 2  # a multiply and an add per term of each dot product
    small = _ops("tutorial/03_attention.psk", "attend", {"B": 1, "T": 3})
    large = _ops("tutorial/03_attention.psk", "attend", {"B": 1, "T": 12})
    assert 0 < small < large <= DEFAULT_BUDGET


def test_a_small_entry_writes_its_reference(tmp_path: Path) -> None:
    out = tmp_path / "small"
    code, _, err = run_presk("export", *ATTEND, "-o", str(out))
    assert (code, err) == (0, "")
    assert (out / "conformance" / "reference.psk.d").is_file()
    assert "exact reference's" in (out / "README.md").read_text()


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_over_the_budget_the_reference_is_skipped_and_make_check_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full, skipped = tmp_path / "full", tmp_path / "skipped"
    assert run_presk("export", *ATTEND, "-o", str(full))[0] == 0
    monkeypatch.setenv(BUDGET_VARIABLE, "100")
    code, stdout, err = run_presk("export", *ATTEND, "-o", str(skipped))
    assert code == 0, err
    assert stdout.startswith("presk export: `attend` at B = 1, T = 3")
    lines = err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("presk export: the exact reference of `attend` is skipped: about ")
    assert "over the budget of 100 (PRESK_REFERENCE_BUDGET); --reference computes it" in lines[0]
    conformance = skipped / "conformance"
    assert not (conformance / "reference.psk.d").exists()
    for name in ("inputs.psk.d", "native.psk.d"):  # the same inputs, drawn without MPFR
        assert (conformance / name).read_bytes() == (full / "conformance" / name).read_bytes()
    marker = (skipped / ".presk-export").read_text()
    assert "reference.psk.d" not in marker
    assert "are absent" in (skipped / "README.md").read_text()
    env = {**os.environ, "PRESK_FROM": str(REPO_ROOT)}
    done = subprocess.run(
        ["make", "-s", "-C", str(skipped), "check", f"PRESK={PRESK}"],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "the outputs are the native backend's, bit for bit" in done.stdout
    assert "no exact reference: the export skipped it" in done.stdout
    assert "--reference" in done.stdout


def test_reference_forces_it_and_no_reference_skips_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BUDGET_VARIABLE, "100")
    forced = tmp_path / "forced"
    code, _, err = run_presk("export", *ATTEND, "--reference", "-o", str(forced))
    assert (code, err) == (0, "")
    assert (forced / "conformance" / "reference.psk.d").is_file()
    monkeypatch.delenv(BUDGET_VARIABLE)
    never = tmp_path / "never"
    code, _, err = run_presk("export", *ATTEND, "--no-reference", "-o", str(never))
    assert code == 0
    assert err == "presk export: the exact reference of `attend` is skipped (--no-reference)\n"
    assert not (never / "conformance" / "reference.psk.d").exists()


@pytest.mark.parametrize(
    ("flags", "env", "words"),
    [
        (("--reference", "--no-reference"), None, "--reference and --no-reference: give one"),
        (("--reference", "--mode", "scop"), None, "only --mode program computes"),
        (("--no-reference", "--mode", "library"), None, "only --mode program computes"),
        ((), "lots", "PRESK_REFERENCE_BUDGET='lots': expected a whole number"),
    ],
)
def test_bad_flags_are_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    flags: tuple[str, ...],
    env: str | None,
    words: str,
) -> None:
    if env is not None:
        monkeypatch.setenv(BUDGET_VARIABLE, env)
    out = tmp_path / "bad"
    code, stdout, err = run_presk("export", *ATTEND, *flags, "-o", str(out))
    assert code == 2 and stdout == ""
    assert len(err.splitlines()) == 1 and words in err, err
    assert not out.exists()


def test_pytorch_conformance_over_the_budget_is_refused_unless_forced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ("export", "tutorial/01_linear.psk", "--target", "pytorch", "--mode", "readable",
            "--conformance-entry", "Linear{3, 2}.apply", "--dim", "batch=2")  # fmt: skip
    monkeypatch.setenv(BUDGET_VARIABLE, "10")
    refused = tmp_path / "refused"
    code, _, err = run_presk(*args, "-o", str(refused))
    assert code == 1 and len(err.splitlines()) == 1
    assert "the conformance test of `Linear{3, 2}.apply` needs its exact reference" in err
    assert "--reference computes it" in err
    assert not refused.exists()
    forced = tmp_path / "forced"
    code, _, err = run_presk(*args, "--reference", "-o", str(forced))
    assert (code, err) == (0, "")
    assert (forced / "conformance" / "expected.json").is_file()
    code, _, err = run_presk(*args, "--no-reference", "-o", str(tmp_path / "no"))
    assert code == 2 and "--no-reference is a flag of --target c" in err


def test_pytorch_training_conformance_over_the_budget_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BUDGET_VARIABLE, "10")
    out = tmp_path / "train"
    code, _, err = run_presk(
        "export", "tutorial/07_train.psk", "--target", "pytorch", "--mode", "readable",
        "--conformance-entry", "train:3", "-o", str(out),
    )  # fmt: skip
    assert code == 1 and len(err.splitlines()) == 1
    assert "the conformance test of train:3 needs 3 steps of the exact reference" in err
    assert not out.exists()
