"""`presk export --target c`: the fast subset of `make c-conformance`, and a good C citizen.

Exported programs must compute the native backend's bits with gcc and with
clang, with and without OpenMP, on one thread and on two; build without a
warning under -Wall -Wextra; let nothing from the source reach C unsanitised;
and have no global state, so two entries link into one program.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT, run_presk

sys.path.insert(0, str(REPO_ROOT))
from conformance import c_export

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def compilers() -> list[str]:
    return [cc for cc in ("gcc", "clang") if shutil.which(cc)]


@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
def test_attention_bits_on_every_compiler_and_team(realize: str) -> None:
    args = dict(c_export.PROGRAMS)["attend B=1 T=3"]
    assert c_export.check_one("attend", args, realize, compilers()) is None


def test_minigpt_loss_bits() -> None:
    args = dict(c_export.PROGRAMS)["MiniGPT loss"]
    assert c_export.check_one("MiniGPT loss", args, "f32", compilers()) is None


def test_summary_line_and_files(tmp_path: Path) -> None:
    out = tmp_path / "tut_c"
    code, stdout, err = run_presk(
        "export", "tutorial/03_attention.psk", "--target", "c", "--entry", "attend",
        "--dim", "B=1", "--dim", "T=3", "-o", str(out),
    )
    assert (code, err) == (0, "")
    assert stdout.startswith("presk export: `attend` at B = 1, T = 3 in f64: 6 launches")
    assert f"`make -C {out} check` builds it" in stdout
    for name in ("model.c", "model.h", "kernels.c", "main.c", "Makefile", "README.md",
                 "presk_rt.h", "presk_libm.c", "conformance/inputs.psk.d",
                 "conformance/native.psk.d", "conformance/reference.psk.d",
                 "conformance/check.sh"):
        assert (out / name).is_file(), name
    readme = (out / "README.md").read_text()
    assert "`q`: f64[batch: 1, heads: 2, seq: 3, hd: 4]" in readme


def test_timing_flag(tmp_path: Path) -> None:
    out = tmp_path / "e"
    run_presk("export", "tutorial/02_norm.psk", "--entry", "RMSNorm{4}.apply", "--dim", "batch=2",
              "-o", str(out))
    subprocess.run(["make", "-s", "-C", str(out), "model"], check=True, capture_output=True)
    timed = subprocess.run(
        [str(out / "model"), "-r", "5", str(out / "conformance/inputs.psk.d"),
         str(tmp_path / "o.psk.d")], capture_output=True, text=True, check=True,
    )
    assert timed.stdout.startswith("presk_RMSNorm_apply: 5 calls, median ")


WEIRD = '''-- names and comments that must not reach C as they are: */ " \\ # ??/ ünïcödé
module Ωmega{Δ : dim} {
  param wé : ℝ[Δ, Δ]  init = xavier_uniform   -- a comment */ with "quotes" and \\ and ??/
  fn ŝtep(x : ℝ[..., Δ]) -> ℝ[..., Δ] =
    let ŷ = x · wé          -- # not a directive
    gelu(ŷ) + x
}
'''


def test_names_are_sanitised(tmp_path: Path) -> None:
    source = tmp_path / "weird.psk"
    source.write_text(WEIRD, encoding="utf-8")
    out = tmp_path / "weird_c"
    code, _, err = run_presk("export", str(source), "--entry", "Ωmega{3}.ŝtep", "--dim", "batch=2",
                             "-o", str(out))
    assert code == 0, err
    for cc in compilers():
        subprocess.run(["make", "-s", "-C", str(out), "clean"], check=True)
        build = subprocess.run(["make", "-s", "-C", str(out), f"CC={cc}", "check"],
                               capture_output=True, text=True)
        assert build.returncode == 0, build.stderr
        assert "warning" not in build.stderr
    text = (out / "model.c").read_text() + (out / "kernels.c").read_text()
    assert "*/ with" not in text
    scop = tmp_path / "weird_scop"
    code, _, err = run_presk("export", str(source), "--entry", "Ωmega{3}.ŝtep", "--dim",
                             "batch=2", "--mode", "scop", "-o", str(scop))
    assert code == 0, err
    for cc in compilers():
        subprocess.run(["make", "-s", "-C", str(scop), "clean"], check=True)
        build = subprocess.run(["make", "-s", "-C", str(scop), f"CC={cc}", "check"],
                               capture_output=True, text=True)
        assert build.returncode == 0 and "warning" not in build.stderr, build.stderr


def test_two_entries_link_into_one_program(tmp_path: Path) -> None:
    """No global state beyond the arena: two exported models in one executable."""
    a, b = tmp_path / "a", tmp_path / "b"
    run_presk("export", "tutorial/02_norm.psk", "--entry", "RMSNorm{4}.apply", "--dim", "batch=2",
              "-o", str(a))
    run_presk("export", "tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=1",
              "--dim", "T=3", "-o", str(b))
    main = tmp_path / "both.c"
    main.write_text(
        '#include <stdio.h>\n'
        'int presk_RMSNorm_apply(); int presk_attend();\n'
        'int main(void) { printf("%p %p\\n", (void *)presk_RMSNorm_apply, (void *)presk_attend);'
        ' return 0; }\n'
    )
    runtime = [str(a / f) for f in ("presk_rng.c", "presk_libm.c", "presk_data.c")]
    subprocess.run(
        ["cc", "-std=c11", "-O1", "-c", str(a / "model.c"), "-o", str(tmp_path / "a.o")],
        check=True,
    )
    subprocess.run(
        ["cc", "-std=c11", "-O1", "-c", str(b / "model.c"), "-o", str(tmp_path / "b.o")],
        check=True,
    )
    done = subprocess.run(
        ["cc", "-o", str(tmp_path / "both"), str(main), str(tmp_path / "a.o"),
         str(tmp_path / "b.o"), *runtime, "-lm"], capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_runs_clean_under_valgrind(tmp_path: Path) -> None:
    out = tmp_path / "v"
    run_presk("export", "tests/examples/minigpt/train_minigpt.psk", "--entry", "loss",
              *c_export.MINI, "--dim", "B=2", "--dim", "T=4", "--realize", "f32", "-o", str(out))
    # Valgrind cannot run AVX-512 code: a portable build (MARCH=), which has the same bits.
    subprocess.run(["make", "-s", "-C", str(out), "OPENMP=", "MARCH=", "model"], check=True,
                   capture_output=True)
    done = subprocess.run(
        ["valgrind", "--error-exitcode=3", "--leak-check=full", "-q", str(out / "model"),
         str(out / "conformance/inputs.psk.d"), str(tmp_path / "o.psk.d")],
        capture_output=True, text=True, env={**os.environ},
    )
    assert done.returncode == 0, done.stderr


DEAD = "dim B\nfn f(x : ℝ[B, 4]) -> ℝ[B, 4] =\n  let unused = exp(x)\n  let y = tanh(x)\n  y * 2\n"


def test_the_summary_counts_launches_nothing_reads(tmp_path: Path) -> None:
    src = tmp_path / "dead.psk"
    src.write_text(DEAD, encoding="utf-8")
    code, out, err = run_presk("export", str(src), "--entry", "f", "--dim", "B=2",
                               "-o", str(tmp_path / "c"))
    assert code == 0, err
    assert "2 launches (1 dead, on one thread) of 2 kernels" in out
    code, out, err = run_presk("export", *dict(c_export.PROGRAMS)["attend B=1 T=3"],
                               "-o", str(tmp_path / "a"))
    assert code == 0, err
    assert "(0 dead, on one thread)" in out


def test_an_entry_whose_result_is_a_constant_exports(tmp_path: Path) -> None:
    src = tmp_path / "constant.psk"
    src.write_text(
        "dim B\nfn f(x : ℝ[B, 4]) -> ℝ[] = 3\n"
        "fn h(x : ℝ[B, 4]) -> (ℝ[B, 4], ℝ[]) = (x, 2)\n",
        encoding="utf-8",
    )
    for entry in ("f", "h"):
        out = tmp_path / entry
        code, _, err = run_presk("export", str(src), "--entry", entry, "--dim", "B=1",
                                 "-o", str(out))  # fmt: skip
        assert code == 0, err
        presk = str(Path(sys.executable).parent / "presk")
        done = subprocess.run(["make", "-s", "-C", str(out), "check", f"PRESK={presk}"],
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "relative 0" in done.stdout
    # Its one nest draws no input: the scop driver's draw is called nowhere, and says so.
    code, _, err = run_presk("export", str(src), "--entry", "f", "--dim", "B=1", "--mode",
                             "scop", "-o", str(tmp_path / "s"))  # fmt: skip
    assert code == 0, err
    done = subprocess.run(["make", "-s", "-C", str(tmp_path / "s"), "check"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr


def test_a_mixed_realization_exports_with_the_native_bits(tmp_path: Path) -> None:
    spec = tmp_path / "r.json"
    spec.write_text('{"default": "f32", "storage": {"loss/%6": "f64"}}')
    out = tmp_path / "mixed"
    code, stdout, err = run_presk("export", "tutorial/04_grad.psk", "--entry", "loss",
                                  "--dim", "D=3", "--dim", "B=2", "--realize", f"@{spec}",
                                  "-o", str(out))
    assert code == 0, err
    assert f"in @{spec}:" in stdout
    done = subprocess.run(["make", "-s", "-C", str(out), "check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "the native backend's, bit for bit" in done.stdout
    assert "double" in (out / "kernels.c").read_text()  # the f64 site


def _sanitizers_work(tmp_path: Path) -> bool:
    probe = tmp_path / "probe.c"
    probe.write_text("int main(void) { return 0; }\n")
    done = subprocess.run(["cc", "-fsanitize=address,undefined", str(probe), "-o",
                           str(tmp_path / "probe")], capture_output=True)
    return done.returncode == 0


SANITIZE = "-std=c11 -ffp-contract=off -O1 -g -Wall -Wextra -fsanitize=address,undefined " \
    "-fno-sanitize-recover=all"


def test_runs_clean_under_address_and_undefined_sanitizers(tmp_path: Path) -> None:
    if not _sanitizers_work(tmp_path):
        pytest.skip("this compiler has no ASan/UBSan runtime")
    out = tmp_path / "a"
    run_presk("export", "tests/ad/minigpt_grad.psk", "--entry", "loss_grad", *c_export.MINI,
              "--dim", "B=2", "--dim", "T=4", "--realize", "bf16", "--threads", "2",
              "-o", str(out))
    done = subprocess.run(["make", "-s", "-C", str(out), f"CFLAGS={SANITIZE}", "check"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "runtime error" not in done.stderr, done.stderr
    scop = tmp_path / "s"
    run_presk("export", "tests/ad/minigpt_grad.psk", "--entry", "loss_grad", *c_export.MINI,
              "--dim", "B=2", "--dim", "T=4", "--mode", "scop", "-o", str(scop))
    done = subprocess.run(["make", "-s", "-C", str(scop),
                           f"CFLAGS={SANITIZE} -Wno-unknown-pragmas", "check"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "runtime error" not in done.stderr, done.stderr


def _arena(summary: str) -> tuple[int, int]:
    arena = summary.split("an arena of ")[1]
    return int(arena.split(" bytes")[0]), int(arena.split("(")[1].split(" without")[0])


def test_frames_are_reused_across_layers(tmp_path: Path) -> None:
    sizes = {}
    for layers in (3, 6):
        code, out, err = run_presk("export", "tutorial/06_tower.psk", "--entry", "Tower.apply",
                                   "--dim", "batch=2", "--const", f"L={layers}",
                                   "-o", str(tmp_path / f"t{layers}"))
        assert code == 0, err
        assert "1 loop, an arena" in out
        sizes[layers] = _arena(out)
    # The layers run one after another in one frame: the arena does not grow with L,
    # while what the calls would take without reuse grows by a layer's frame each.
    assert sizes[3][0] == sizes[6][0] < sizes[3][1] < sizes[6][1]
    assert (sizes[6][1] - sizes[3][1]) % 3 == 0
