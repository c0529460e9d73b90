"""The command line: help, version, commands not built yet, and one-line usage errors.

Everything runs `presk.cli.main` in process (see conftest.run_presk), except the
last tests, which start the module as a real subprocess once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT, run_presk

from presk import __version__
from presk.cli import COMMANDS, NOT_BUILT, build_parser

BUILT = sorted(set(COMMANDS) - set(NOT_BUILT))


def one_line(text: str) -> bool:
    return text.endswith("\n") and text.count("\n") == 1 and text.strip() != ""


# --- help and version ------------------------------------------------------------------------


def test_help_lists_every_command() -> None:
    code, out, err = run_presk("--help")
    assert code == 0
    assert err == ""
    assert out.startswith("usage: presk")
    for name in COMMANDS:
        assert f"\n    {name} " in out, f"`presk --help` does not list `{name}`"


def test_no_command_prints_help_and_exits_2() -> None:
    code, out, _ = run_presk()
    assert code == 2
    assert out.startswith("usage: presk")


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag: str) -> None:
    assert run_presk(flag) == (0, f"presk {__version__}\n", "")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_command_help(command: str) -> None:
    code, out, err = run_presk(command, "--help")
    assert code == 0
    assert err == ""
    assert out.startswith(f"usage: presk {command}")
    assert COMMANDS[command].split()[0] in out


def test_commands_table_matches_parser() -> None:
    """Every command of the table has a subparser, and the not-built set is a subset."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == set(COMMANDS)  # type: ignore[arg-type]
    assert set(NOT_BUILT) <= set(COMMANDS)
    assert {"check", "run", "dump"} <= set(BUILT)


# --- commands not built yet ------------------------------------------------------------------


@pytest.mark.parametrize("command", sorted(NOT_BUILT))
@pytest.mark.parametrize("extra", [(), ("tutorial/07_train.psk", "--anything", "x")])
def test_not_built(command: str, extra: tuple[str, ...]) -> None:
    code, out, err = run_presk(command, *extra)
    assert code == 2
    assert out == ""
    assert one_line(err), err
    assert err.startswith(f"presk {command}: not built yet")


@pytest.mark.parametrize("stage", ["core-opt", "sensitivity", "network"])
def test_later_dump_stages_not_built(stage: str) -> None:
    code, out, err = run_presk("dump", "tutorial/01_linear.psk", "--stage", stage)
    if code == 0:
        pytest.skip(f"`--stage {stage}` is built now")
    assert code == 2
    assert out == ""
    assert one_line(err) and "not built yet" in err


# --- files that cannot be read ---------------------------------------------------------------


@pytest.fixture
def bad_files(tmp_path: Path) -> dict[str, Path]:
    binary = tmp_path / "binary.psk"
    binary.write_bytes(b"fn f(x : \x00\x01\x02) = x\n")
    latin = tmp_path / "latin1.psk"
    latin.write_bytes("-- café\nconst N : nat = 1\n".encode("latin-1"))
    folder = tmp_path / "folder.psk"
    folder.mkdir()
    return {
        "missing": tmp_path / "no_such_file.psk",
        "directory": folder,
        "binary": binary,
        "latin1": latin,
    }


@pytest.mark.parametrize("kind", ["missing", "directory", "binary", "latin1"])
@pytest.mark.parametrize(
    "argv",
    [
        ("check",),
        ("check", "--summary"),
        ("dump", "--stage", "tokens"),
        ("dump", "--stage", "ast"),
        ("dump", "--stage", "elab"),
        ("dump", "--stage", "core"),
    ],
    ids=lambda argv: "-".join(a.lstrip("-") for a in argv),
)
def test_unreadable_file(bad_files: dict[str, Path], kind: str, argv: tuple[str, ...]) -> None:
    path = str(bad_files[kind])
    code, out, err = run_presk(argv[0], path, *argv[1:])
    assert code == 1
    assert out == ""
    assert one_line(err), err
    assert "Traceback" not in err
    assert "internal error" not in err
    assert err.startswith(f"presk {argv[0]}: {path}: ")


def test_unreadable_file_messages(bad_files: dict[str, Path]) -> None:
    messages = {kind: run_presk("check", str(p))[2] for kind, p in bad_files.items()}
    assert "No such file" in messages["missing"]
    assert "directory" in messages["directory"]
    assert "NUL" in messages["binary"]
    assert "UTF-8" in messages["latin1"]


def test_empty_file_checks(tmp_path: Path) -> None:
    empty = tmp_path / "empty.psk"
    empty.write_text("")
    assert run_presk("check", str(empty)) == (0, "", "")


# --- usage errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ("check", "--bogus", "tutorial/01_linear.psk"),
        ("check", "tutorial/01_linear.psk", "--bogus"),
        ("--bogus",),
        ("nonsense-command",),
        ("check",),
        ("dump", "tutorial/01_linear.psk"),  # --stage is required
        ("check", "tutorial/01_linear.psk", "extra.psk"),
    ],
)
def test_usage_error_is_one_line_exit_2(argv: tuple[str, ...]) -> None:
    code, out, err = run_presk(*argv)
    assert code == 2
    assert out == ""
    assert one_line(err), err
    assert err.startswith("presk")


@pytest.mark.parametrize("value", ["H=abc", "H=", "H", "=3", "1H=3", "H=1/0", "H=nan"])
def test_bad_const_flag(value: str) -> None:
    code, out, err = run_presk("check", "tutorial/03_attention.psk", "--const", value)
    assert code == 2
    assert out == ""
    assert one_line(err), err
    assert err.startswith("presk check: --const")


def test_unknown_const() -> None:
    code, out, err = run_presk("check", "tutorial/03_attention.psk", "--const", "NOPE=3")
    assert code != 0
    assert out == ""
    assert one_line(err), err
    assert "NOPE" in err


@pytest.mark.parametrize("value", ["3", "3.0", "6/2", "3e0", " 3 "])
def test_const_number_spellings(value: str) -> None:
    """Exact spellings of the same number give the same (failing) result as H=3."""
    code, _, err = run_presk("check", "tutorial/03_attention.psk", "--const", f"H={value}")
    assert code == 1
    assert "[E1005]" in err and "[E1004]" in err


def test_const_reaches_imported_files() -> None:
    """`--const D=5` overrides the D of 06_tower, imported by 07_train."""
    code, out, err = run_presk("check", "tutorial/06_tower.psk", "--const", "D=5", "--summary")
    assert (code, err) == (0, "")
    assert "06_tower.psk Tower.apply : ℝ[..., model: 5]" in out
    # 07_train's loss is written for model: 4, so the override makes it fail there.
    code, out, err = run_presk("check", "tutorial/07_train.psk", "--const", "D=5")
    assert code == 1
    assert err.startswith("[E2006] Error: dimension mismatch: `5` vs `4`")
    assert "tutorial/07_train.psk:7:26" in err  # at the argument `x`


def test_dump_unknown_stage() -> None:
    code, out, err = run_presk("dump", "tutorial/01_linear.psk", "--stage", "nonsense")
    assert code == 2
    assert out == ""
    assert one_line(err), err
    assert "nonsense" in err


def test_dump_tokens_reports_lex_errors(tmp_path: Path) -> None:
    path = tmp_path / "lex.psk"
    path.write_text('const N : nat = 1 ;\nimport "oops\n')
    code, out, err = run_presk("dump", str(path), "--stage", "tokens")
    assert code == 1
    assert "[E0001]" in err and "[E0002]" in err
    assert out.splitlines()[-1].startswith("Eof @ ")


def test_relative_paths_resolve_from_cwd() -> None:
    """Imports are relative to the importing file, not to the working directory."""
    code, out, err = run_presk("check", "04_grad.psk", cwd=REPO_ROOT / "tutorial")
    assert (code, out, err) == (0, "", "")


# --- the real entry points -------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["NO_COLOR"] = "1"
    return env


@pytest.mark.parametrize("module", ["presk.cli", "presk"])
def test_module_entry_point_version(module: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", module, "--version"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=_env(),
        timeout=60,
    )
    assert result.returncode == 0
    assert result.stdout == f"presk {__version__}\n"
    assert result.stderr == ""


def test_module_entry_point_exit_code_and_stderr() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "presk.cli", "check", "tests/diag/E2003_bad_axis.psk"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=_env(),
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("[E2003] Error: cannot broadcast")
    assert "\x1b[" not in result.stderr


def test_console_script() -> None:
    script = Path(sys.executable).with_name("presk")
    if not script.exists():
        pytest.skip("no `presk` console script next to this interpreter")
    result = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, env=_env(), timeout=60
    )
    assert (result.returncode, result.stdout) == (0, f"presk {__version__}\n")


# --- unexpected exceptions -------------------------------------------------------------------


def test_unexpected_exception_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug inside presk prints one line (no traceback) unless PRESK_DEBUG is set."""
    from presk.commands import check

    def boom(*args: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(check, "front_end", boom)
    code, out, err = run_presk("check", "tutorial/01_linear.psk")
    assert code == 1
    assert out == ""
    assert one_line(err), err
    assert "internal error" in err and "RuntimeError: boom" in err
    with pytest.raises(RuntimeError, match="boom"):
        run_presk("check", "tutorial/01_linear.psk", debug=True)


# --- the command layer ---------------------------------------------------------------------


def test_help_command() -> None:
    code, out, _ = run_presk("help")
    assert code == 0 and out.startswith("usage: presk") and "Built today" in out
    code, out, _ = run_presk("help", "export")
    assert code == 0 and out.startswith("usage: presk export")
    code, out, err = run_presk("help", "nonesuch")
    assert code == 2 and out == "" and one_line(err)
    code, out, _ = run_presk("help", "data", "chars")  # an action's own help
    assert code == 0 and out.startswith("usage: presk data chars")


@pytest.mark.parametrize(
    "argv",
    [
        ("calibrate", "--step"),
        ("check", "tutorial/01_linear.psk", "--precision", "env.json"),
        ("run", "tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--opt"),
        ("dump", "tutorial/01_linear.psk", "--stage", "core", "--format", "eq"),
        ("bench", "tutorial/01_linear.psk", "--profile", "p.json"),
        ("export", "tutorial/01_linear.psk", "--target", "pytorch"),
    ],
)
def test_flags_not_built_say_so(argv: tuple[str, ...]) -> None:
    code, out, err = run_presk(*argv)
    assert (code, out) == (2, "")
    assert one_line(err) and err.startswith(f"presk {argv[0]}: not built yet"), err


def test_an_unknown_dim_is_a_usage_error() -> None:
    code, out, err = run_presk(
        "run", "tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=1", "--dim", "T=3",
        "--dim", "Q=2",
    )  # fmt: skip
    assert (code, out) == (2, "")
    assert one_line(err) and "--dim Q" in err and "B, T" in err


@pytest.mark.parametrize("value", ["abc", "0", "-1", "99999", "1.5"])
def test_presk_threads_is_validated_as_threads_is(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRESK_THREADS", value)
    code, out, err = run_presk(
        "run", "tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=1", "--dim", "T=3",
        "--backend", "native",
    )  # fmt: skip
    assert (code, out) == (2, "")
    assert one_line(err) and f"PRESK_THREADS={value}" in err


def test_bench_reference_runs() -> None:
    """`make bench-reference` times `presk run` through the command layer."""
    import importlib.util

    path = REPO_ROOT / "benchmarks" / "reference.py"
    spec = importlib.util.spec_from_file_location("bench_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (seconds,) = module._time_run(64, 1)
    assert seconds > 0


@pytest.mark.parametrize("value", ["1e1000000000", "1e-1000000000", "9" * 5000])
def test_huge_const_values_are_refused_at_once(value: str) -> None:
    code, out, err = run_presk("check", "tutorial/03_attention.psk", "--const", f"H={value}")
    assert (code, out) == (2, "")
    assert one_line(err) and "--const H=" in err


def test_a_path_is_printed_as_one_line_of_printable_text(tmp_path: Path) -> None:
    program = tmp_path / "z\x1b[31m\nb.psk"
    program.write_text("dim B\nstatic assert 1 == 2\n", encoding="utf-8")
    code, out, err = run_presk("check", str(program))
    assert code == 1 and "\x1b" not in err and "z\\x1b[31m\\nb.psk:2:1" in err
    program.write_text("dim B\nfn f(x : ℝ[B]) -> ℝ[B] = x\n", encoding="utf-8")
    code, out, err = run_presk("dump", str(program), "--stage", "elab")
    assert code == 0 and "== " in out and "\x1b" not in out + err


def test_an_export_s_summary_is_one_line(tmp_path: Path) -> None:
    out_dir = tmp_path / "e\x1b[1m\nx"
    code, out, err = run_presk(
        "export", "tutorial/01_linear.psk", "--target", "c", "--entry", "Linear{3, 2}.apply",
        "--dim", "batch=2", "-o", str(out_dir),
    )  # fmt: skip
    assert code == 0, err
    assert out.count("\n") == 1 and "\x1b" not in out and "e\\x1b[1m\\nx" in out


def test_a_stack_too_deep_to_write_out_is_refused_before_it_is_built() -> None:
    code, out, err = run_presk(
        "dump", "tutorial/06_tower.psk", "--stage", "core", "--unroll-stack", "--const",
        "L=1000000000",
    )  # fmt: skip
    assert (code, out) == (1, "") and one_line(err) and "1000000000 layers" in err


def test_a_stack_too_deep_is_not_unrolled_into_pytorch(tmp_path: Path) -> None:
    code, out, err = run_presk(
        "export", "tutorial/06_tower.psk", "--target", "pytorch", "--mode", "readable",
        "--stack", "unroll", "--const", "L=1000000000", "-o", str(tmp_path / "pt"),
    )  # fmt: skip
    assert (code, out) == (1, "") and one_line(err) and "1000000000 layers" in err
    assert not (tmp_path / "pt").exists()
