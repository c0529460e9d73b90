"""Golden outputs of the tutorial commands and of the intermediate dumps.

Each case runs `presk ARGV…` in process from the repository root and compares
`# exit N`, `-- stdout`, the stdout, `-- stderr`, the stderr with
`tests/golden/<name>.out`. Run `pytest tests --update-golden` to rewrite them.
Cases on `tests/examples/` are skipped while those files do not exist.
"""

from __future__ import annotations

import pytest
from conftest import REPO_ROOT, compare_golden, run_presk

GOLDEN = REPO_ROOT / "tests" / "golden"

TUTORIAL = [
    "01_linear",
    "02_norm",
    "03_attention",
    "04_grad",
    "05_sample",
    "06_tower",
    "07_train",
]
EXAMPLES = [
    "mlp/mlp",
    "minigpt/minigpt",
    "minigpt/train_minigpt",
]

CASES: dict[str, tuple[str, ...]] = {}
for _t in TUTORIAL:
    CASES[f"check_{_t}"] = ("check", f"tutorial/{_t}.psk")
    CASES[f"summary_{_t}"] = ("check", f"tutorial/{_t}.psk", "--summary")
CASES["check_03_attention_H3"] = ("check", "tutorial/03_attention.psk", "--const", "H=3")
CASES["check_03_attention_D12_H3"] = (
    "check",
    "tutorial/03_attention.psk",
    "--const",
    "D=12",
    "--const",
    "H=3",
    "--summary",
)
CASES["dump_tokens_01_linear"] = ("dump", "tutorial/01_linear.psk", "--stage", "tokens")
CASES["dump_ast_02_norm"] = ("dump", "tutorial/02_norm.psk", "--stage", "ast")
CASES["dump_elab_04_grad"] = ("dump", "tutorial/04_grad.psk", "--stage", "elab")
CASES["dump_elab_06_tower"] = ("dump", "tutorial/06_tower.psk", "--stage", "elab")
CASES["dump_core_03_attention"] = ("dump", "tutorial/03_attention.psk", "--stage", "core")
CASES["dump_core_04_grad"] = ("dump", "tutorial/04_grad.psk", "--stage", "core")
CASES["dump_core_06_tower"] = ("dump", "tutorial/06_tower.psk", "--stage", "core")
CASES["dump_core_06_tower_unrolled"] = (
    "dump", "tutorial/06_tower.psk", "--stage", "core", "--unroll-stack",
)
CASES["dump_core_after_ad_04_grad"] = ("dump", "tutorial/04_grad.psk", "--stage", "core-after-ad")
CASES["dump_sched_02_norm"] = ("dump", "tutorial/02_norm.psk", "--stage", "sched")
CASES["dump_kernel_01_linear"] = (
    "dump", "tutorial/01_linear.psk", "--stage", "kernel", "--entry", "Linear{3, 2}.apply",
    "--dim", "batch=4", "--realize", "f32",
)
CASES["dump_kernel_03_attention_pack"] = (
    "dump", "tutorial/03_attention.psk", "--stage", "kernel", "--entry", "scores",
    "--dim", "B=1", "--dim", "T=4", "--plan", "@tutorial/pack.json",
)
for _e in EXAMPLES:
    _n = _e.split("/")[1]
    CASES[f"check_example_{_n}"] = ("check", f"tests/examples/{_e}.psk")
    CASES[f"summary_example_{_n}"] = ("check", f"tests/examples/{_e}.psk", "--summary")


def golden_text(code: int, out: str, err: str) -> str:
    return f"# exit {code}\n-- stdout\n{out}-- stderr\n{err}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, update_golden: bool) -> None:
    argv = CASES[name]
    source = REPO_ROOT / argv[1]
    if argv[1].startswith("tests/examples/") and not source.exists():
        pytest.skip(f"{argv[1]} is not written yet")
    code, out, err = run_presk(*argv)
    assert "Traceback" not in err
    assert "internal error" not in err
    assert code in (0, 1)
    compare_golden(GOLDEN / f"{name}.out", golden_text(code, out, err), update_golden)


@pytest.mark.parametrize("tutorial", TUTORIAL)
def test_tutorial_checks_clean(tutorial: str) -> None:
    """Every tutorial program checks without errors or warnings."""
    assert run_presk("check", f"tutorial/{tutorial}.psk") == (0, "", "")


def test_no_stale_goldens() -> None:
    """Every golden file belongs to a case (a renamed case leaves no orphan)."""
    stale = {p.stem for p in GOLDEN.glob("*.out")} - set(CASES)
    assert not stale, f"golden files without a case: {sorted(stale)}"
