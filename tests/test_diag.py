"""One small program per diagnostic code, checked against its golden stderr.

Each case is `tests/diag/<CODE>_<what>.psk` with `tests/diag/<CODE>_<what>.out`: the exit
code as `# exit N` on the first line, then the exact stderr of
`presk check tests/diag/<CODE>_<what>.psk` run from the repository root. Files under
`tests/diag/lib/` are imported by cases and are not cases themselves.
Run `pytest tests --update-golden` to rewrite the `.out` files (then review the diff).

The manual's own examples (bad_axis, bad_ret, bad_unbound, bad_syntax, bad_argmax,
bad_rand, and the `--const H=3` pair on tutorial/03) are also compared with the manual's
boxes below, so that rewriting goldens cannot silently drift away from the manual.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO_ROOT, compare_golden, run_presk

DIAG = REPO_ROOT / "tests" / "diag"
CASES = sorted(p.name for p in DIAG.glob("*.psk"))
NAME = re.compile(r"^[EW]\d{4}_[a-z0-9_]+\.psk$")


def golden_text(code: int, stderr: str) -> str:
    return f"# exit {code}\n{stderr}"


def test_cases_exist() -> None:
    assert len(CASES) >= 30
    for name in CASES:
        assert NAME.match(name), f"{name}: cases are named <CODE>_<what>.psk"


@pytest.mark.parametrize("name", CASES)
def test_diagnostic(name: str, update_golden: bool) -> None:
    code, out, err = run_presk("check", f"tests/diag/{name}")
    assert out == "", "`presk check` without --summary prints nothing on stdout"
    assert "Traceback" not in err
    assert "internal error" not in err
    expected_code = name[:5]
    # The case's own code must be among those reported; warnings alone exit 0.
    assert f"[{expected_code}] " in err, f"{name} does not report {expected_code}"
    assert code == (0 if expected_code.startswith("W") else 1)
    compare_golden(DIAG / name.replace(".psk", ".out"), golden_text(code, err), update_golden)


def test_every_golden_has_a_case() -> None:
    outs = {p.name.removesuffix(".out") for p in DIAG.glob("*.out")}
    assert outs == {name.removesuffix(".psk") for name in CASES}


# --- The manual's boxes ----------------------------------------------------------------------

MANUAL: dict[str, str] = {
    "E2003_bad_axis.psk": """\
[E2003] Error: cannot broadcast `ℝ[batch: B, model: 4]` with `ℝ[time: B, model: 4]`
   ,-[ bad_axis.psk:3:3 ]
   |
 3 |   a + b
   |   ^^|^^
   |     `---- no alignment by position or by name
   |
   | Note: axes align from the last one, or by name when every axis of the smaller operand is named
---'
""",
    "E2001_bad_unbound.psk": """\
[E2001] Error: unresolved name `c`
   ,-[ bad_unbound.psk:5:13 ]
   |
 5 |     x · w + c
   |             |
   |             `-- not a variable, parameter, module member or constant in scope
---'
""",
    "E2011_bad_ret.psk": """\
[E2006] Error: dimension mismatch: `In` vs `Out`
   ,-[ bad_ret.psk:5:5 ]
   |
 5 |     x · w + b
   |     ^^^^|^^^^
   |         `------ differ for In = 1, Out = 0
---'
[E2011] Error: `apply` returns `ℝ[..., Out]` but is declared `-> ℝ[..., In]`
   ,-[ bad_ret.psk:5:5 ]
   |
 4 | ,->   fn apply(x : ℝ[..., In]) -> ℝ[..., In] =
 5 | |->     x · w + b
   | |       ^^^^|^^^^
   | |           `------- this body has type `ℝ[..., Out]`
   | |
   | `------------------- declared `ℝ[..., In]`
---'
""",
    "E0010_bad_syntax.psk": """\
[E0010] Error: expected `=`, found identifier `x`
   ,-[ bad_syntax.psk:4:5 ]
   |
 4 |     x · w
   |     |
   |     `-- expected `=` here
---'
""",
    "E3001_bad_argmax.psk": """\
[E3001] Error: cannot differentiate through `argmax`: the function is discontinuous (Disc) in `θ`
   ,-[ bad_argmax.psk:6:3 ]
   |
 4 |   mean(real(argmax(net.apply(θ, x))))
   |             ^^^^^^^^^^^|^^^^^^^^^^^
   |                        `------------- `argmax` makes the result discontinuous in `θ`
   |
 6 |   grad(λ θ. hits(net, θ, x))(θ)
   |   ^^^^^^^^^^^^^|^^^^^^^^^^^^
   |                `-------------- `grad` here, with respect to `θ`
   |
   | Help: use `softmax` for a smooth surrogate, or an explicit straight-through relaxation
   |
   | Note: in `hits_grad`; `grad` requires the class C⁰⁺ or better
---'
""",
    "E4001_bad_rand.psk": """\
[E4001] Error: `pick` uses the effect `Rand` without declaring it
   ,-[ bad_rand.psk:3:3 ]
   |
 2 | ,-> fn pick(key : key, logits : ℝ[batch: B, vocab: 8]) -> idx[8][batch: B] =
 3 | |->   sample(key, logits)
   | |     ^^^^^^^^^|^^^^^^^^^
   | |              `------------ this uses `Rand`
   | |
   | `--------------------------- declared without `uses`
   |
   |     Help: add `uses Rand` to the signature of `pick`
---'
""",
}


@pytest.mark.parametrize("name", sorted(MANUAL))
def test_manual_example(name: str) -> None:
    """The case reproduces the manual's box, up to the file name shown."""
    code, _, err = run_presk("check", f"tests/diag/{name}")
    assert code == 1
    manual_name = name.split("_", 1)[1]
    assert err.replace(f"tests/diag/{name}", manual_name) == MANUAL[name]


MANUAL_H3 = """\
[E1005] Error: `HD` is not a natural number
   ,-[ tutorial/03_attention.psk:4:18 ]
   |
 4 | const HD : nat = D / H      -- must be exact: checked at elaboration
   |                  ^^|^^
   |                    `---- evaluates to 8/3
   |
   | Note: constants are evaluated exactly: a division must be exact and the result non-negative
---'
[E1004] Error: static assertion fails: D % H == 0
   ,-[ tutorial/03_attention.psk:5:1 ]
   |
 5 | static assert D % H == 0
   | ^^^^^^^^^^^^|^^^^^^^^^^^
   |             `------------- `D % H == 0` is false with the constants of this file
---'
"""


def test_manual_example_const_override() -> None:
    assert run_presk("check", "tutorial/03_attention.psk", "--const", "H=3") == (1, "", MANUAL_H3)


MANUAL_MLP = """\
[W0001] Warning: implicit dimension `B`
    ,-[ tests/examples/mlp/mlp.psk:26:65 ]
    |
 26 | fn mse{D : dim}(net : MLP{D, 4*D}, θ : params net, x : ℝ[batch: B, model: D],
    |                                                                 |
    |                                                                 `-- not declared; taken as a dimension of this function
    |
    | Help: declare it with `dim B` at file level or as a type parameter `{B : dim}`
----'
"""  # noqa: E501


def test_manual_example_mlp_warning() -> None:
    path = Path(REPO_ROOT / "tests/examples/mlp/mlp.psk")
    if not path.exists():
        pytest.skip("tests/examples/mlp/mlp.psk is not written yet")
    code, _, err = run_presk("check", "tests/examples/mlp/mlp.psk")
    assert code == 0
    assert err.startswith(MANUAL_MLP)
