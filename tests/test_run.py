"""Golden outputs of `presk run` on the reference interpreter: the tutorial's commands.

Each case runs `presk run …` in process from the repository root and compares
`# exit N`, the stdout and the stderr with `tests/run/<name>.out` (the digits
are ours: our generator is not the manual's). `pytest --update-golden`
rewrites them; read the diff before committing.
"""

from __future__ import annotations

import json

import pytest
from conftest import REPO_ROOT, compare_golden, run_presk

GOLDEN = REPO_ROOT / "tests" / "run"
MINI = ("--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2")

CASES: dict[str, tuple[str, ...]] = {
    "01_no_entry": ("tutorial/01_linear.psk",),
    "01_verbose": ("tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=4",
                   "--verbose"),
    "01_no_prefix": ("tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply"),
    "01_seed1_bits64": ("tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim",
                        "batch=4", "--seed", "1", "--bits", "64", "--digits", "6"),
    "02_norm": ("tutorial/02_norm.psk", "--entry", "RMSNorm{4}.apply", "--dim", "batch=2",
                "--digits", "6"),
    "03_attend": ("tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=1", "--dim", "T=3",
                  "--digits", "5"),
    "03_bound": ("tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=1", "--dim",
                 "T=2000"),
    "04_loss": ("tutorial/04_grad.psk", "--entry", "loss", "--dim", "D=3", "--dim", "B=2",
                "--digits", "6"),
    "04_loss_grad": ("tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3", "--dim",
                     "B=2", "--digits", "6"),
    "05_pick": ("tutorial/05_sample.psk", "--entry", "pick", "--dim", "B=5"),
    "05_pick_seed3": ("tutorial/05_sample.psk", "--entry", "pick", "--dim", "B=5", "--seed", "3"),
    "06_tower": ("tutorial/06_tower.psk", "--entry", "Tower.apply", "--dim", "batch=2",
                 "--digits", "6"),
    "06_tower_L1": ("tutorial/06_tower.psk", "--entry", "Tower.apply", "--dim", "batch=2",
                    "--digits", "6", "--const", "L=1"),
    "07_training_run": ("tutorial/07_train.psk",),
    "07_loss": ("tutorial/07_train.psk", "--entry", "loss", "--dim", "B=4", "--digits", "6"),
    "mlp_mse": ("tests/examples/mlp/mlp.psk", "--entry", "mse", "--dim", "D=4", "--dim", "B=3"),
    "mlp_mse_grad": ("tests/examples/mlp/mlp.psk", "--entry", "mse_grad", "--dim", "D=2", "--dim",
                     "B=2", "--digits", "6"),
    "minigpt_loss": ("tests/examples/minigpt/train_minigpt.psk", "--entry", "loss", *MINI,
                     "--dim", "B=2", "--dim", "T=8"),
    "minigpt_training_run": ("tests/examples/minigpt/train_minigpt.psk",),
    "unknown_entry": ("tutorial/03_attention.psk", "--entry", "nope", "--dim", "B=1"),
    "bad_dim": ("tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=x"),
    "bad_bits": ("tutorial/03_attention.psk", "--entry", "attend", "--bits", "3"),
    "log_negative": ("tests/run/log_negative.psk", "--entry", "f"),
    "masked_row": ("tests/run/masked_row.psk", "--entry", "f"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_run_golden(name: str, update_golden: bool) -> None:
    code, out, err = run_presk("run", *CASES[name])
    assert "Traceback" not in err and "internal error" not in err
    text = f"# exit {code}\n-- stdout\n{out}-- stderr\n{err}"
    compare_golden(GOLDEN / f"{name}.out", text, update_golden)


def test_minigpt_loss_is_ln_64() -> None:
    """A zero head predicts the uniform distribution: the loss is exactly ln 64."""
    code, out, _ = run_presk(
        "run", "tests/examples/minigpt/train_minigpt.psk", "--entry", "loss", *MINI,
        "--dim", "B=2", "--dim", "T=8",
    )
    assert (code, out) == (0, "ℝ[] = 4.15888308336\n")


def test_json_is_exact_and_complete() -> None:
    code, out, _ = run_presk(
        "run", "tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=4",
        "--json",
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["dims"] == {"In": 3, "Out": 2} and doc["bits"] == 256 and doc["seed"] == 0
    assert set(doc["inputs"]) == {"θ", "x"}
    assert set(doc["inputs"]["θ"]) == {"w", "b"}
    result = doc["output"]
    assert result["axes"] == [["batch", 4], [None, 2]]
    # Exact decimal strings: far more digits than a double's repr.
    first = result["data"][0][0]
    assert isinstance(first, str) and len(first.replace("-", "").replace(".", "")) > 30


def test_same_seed_same_digits_and_other_seed_other_digits() -> None:
    args = ("tutorial/02_norm.psk", "--entry", "RMSNorm{4}.apply", "--dim", "batch=2")
    assert run_presk("run", *args) == run_presk("run", *args)
    assert run_presk("run", *args)[1] != run_presk("run", *args, "--seed", "7")[1]


def test_remat_forms_agree() -> None:
    args = ("tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3", "--dim", "B=2")
    assert run_presk("run", *args) == run_presk("run", *args, "--remat", "recompute")


def test_data_fills_the_last_argument() -> None:
    base = ("tutorial/07_train.psk", "--entry", "loss", "--dim", "B=8")
    code, out, err = run_presk("run", *base, "--data", "tutorial/data/pairs.psk.d")
    assert code == 0, err
    synthesized = run_presk("run", *base)[1]
    assert out.startswith("ℝ[] = ") and out != synthesized
    # The same batch on the native backend, to its digits.
    native = run_presk("run", *base, "--data", "tutorial/data/pairs.psk.d", "--backend", "native")
    assert native[1] == out


def test_data_of_the_wrong_type_is_one_line() -> None:
    code, _, err = run_presk("run", "tutorial/02_norm.psk", "--entry", "RMSNorm{4}.apply",
                             "--dim", "batch=2", "--data", "tutorial/data/pairs.psk.d")
    assert code == 2 and err.count("\n") == 1 and "--data" in err
