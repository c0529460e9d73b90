"""Names from the program reach C injectively and clear of C's and the runtime's names.

Property tests over random identifiers decode every escaped name back to its
path (so the mangling is injective by construction, not by luck), and
check the C syntax and the reserved words; end-to-end tests run programs
whose parameter and entry names are C keywords, macros, runtime names or
today's collisions, natively and as an exported program.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO_ROOT, run_presk
from hypothesis import given, settings
from hypothesis import strategies as st

from presk import names

C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Identifiers as Presk spells them: Unicode letters, primes, digits, underscores.
_chars = st.one_of(
    st.characters(categories=("Lu", "Ll", "Lo", "Nd")),
    st.sampled_from("_'_xXu0123456789aeθé"),
)
identifiers = st.text(_chars, min_size=1, max_size=12)
paths = st.lists(identifiers, min_size=1, max_size=4).map(tuple)


def decode(name: str) -> tuple[str, ...]:
    """The path of an escaped name (the inverse `escaped` is proved injective by)."""
    assert name.startswith(names.ESCAPE_PREFIX + "__"), name
    rest = name[len(names.ESCAPE_PREFIX) :]
    out: list[str] = []
    i = 0
    while i < len(rest):
        assert rest.startswith("__", i), (name, i)
        i += 2
        comp: list[str] = []
        while i < len(rest):
            ch = rest[i]
            if ch != "_":
                comp.append(ch)
                i += 1
                continue
            tag = rest[i + 1]
            if tag == "1":
                comp.append("_")
                i += 2
            elif tag == "x":
                end = rest.index("_", i + 2)
                comp.append(chr(int(rest[i + 2 : end], 16)))
                i = end + 1
            else:
                assert tag == "_", (name, i)
                break
        out.append("".join(comp))
    return tuple(out)


def _safe(name: str) -> None:
    assert C_IDENT.fullmatch(name), name
    assert name not in names.C_KEYWORDS and name not in names.C_MACROS, name
    assert not name.startswith("_") and not name.lower().startswith("presk_"), name


@settings(max_examples=500, deadline=None)
@given(paths)
def test_escaped_names_decode_to_their_path(path: tuple[str, ...]) -> None:
    name = names.escaped(path)
    assert decode(name) == path
    _safe(name)
    assert "__" in name


@settings(max_examples=500, deadline=None)
@given(st.lists(identifiers, min_size=1, max_size=8, unique=True))
def test_ident_is_injective_and_safe(words: list[str]) -> None:
    idents = [names.ident(w) for w in words]
    assert len(set(idents)) == len(idents)
    for word, name in zip(words, idents, strict=True):
        _safe(name)
        assert not names.is_reserved(name) or "__" in name
        if "__" in name:
            assert decode(name) == (word,)
        else:
            assert name == word  # a plain name stands for itself


@settings(max_examples=500, deadline=None)
@given(st.lists(paths, min_size=1, max_size=8, unique=True))
def test_fields_are_distinct_and_safe(leaf_paths: list[tuple[str, ...]]) -> None:
    fields = names.fields(leaf_paths)
    assert len(set(fields)) == len(fields)
    for path, field in zip(leaf_paths, fields, strict=True):
        _safe(field)
        if "__" in field:
            assert decode(field) == path


@settings(max_examples=300, deadline=None)
@given(identifiers)
def test_entry_symbols_are_clear_of_the_runtime(entry: str) -> None:
    symbol = names.entry_symbol(entry)
    assert C_IDENT.fullmatch(symbol) and symbol.startswith("presk_")
    for derived in (symbol, symbol + "_in", symbol.upper() + "_H", symbol.upper() + "_ARENA_BYTES"):
        assert derived not in names.RUNTIME_NAMES


def test_ordinary_names_keep_todays_spelling() -> None:
    assert names.fields([("theta", "blocks", "proj", "w"), ("x",), ("θ", "b")]) == [
        "theta_blocks_proj_w",
        "x",
        "theta_b",
    ]
    assert names.fields([("out", "0"), ("out", "1")]) == ["out_0", "out_1"]
    assert names.entry_symbol("RMSNorm.apply") == "presk_RMSNorm_apply"
    assert names.hint("RMSNorm{8}.apply") == "RMSNorm_8__apply"  # as today


def test_todays_collisions_are_told_apart() -> None:
    cases = [
        [("x'",), ("xu27",)],
        [("é",), ("ue9",)],
        [("x", "0"), ("x_0",)],
        [("θ",), ("theta",)],
        [("int",), ("return",), ("NULL",), ("INFINITY",), ("__LINE__",), ("PRESK_RT_H",)],
        [("presk_exp",), ("_X",), ("INT8_MAX",), ("EDOM",), ("M_PI",)],
    ]
    for case in cases:
        fields = names.fields(case)
        assert len(set(fields)) == len(fields), fields
        for field in fields:
            _safe(field)
    for entry in ("rt", "rng", "k0", "f1_x", "uniform", "exp", "arena", "data"):
        symbol = names.entry_symbol(entry)
        assert symbol not in names.RUNTIME_NAMES and "__" in symbol, symbol


def test_the_runtime_names_are_all_listed() -> None:
    """Every identifier of our namespace the runtime defines is in `RUNTIME_NAMES`."""
    sources = [*(REPO_ROOT / "runtime/c").glob("*.[ch]"), *(REPO_ROOT / "libm/musl").glob("*.[ch]")]
    found: set[str] = set()
    for path in sources:
        found |= set(re.findall(r"\b(?:presk|PRESK)_\w*", path.read_text(encoding="utf-8")))
    assert found - names.RUNTIME_NAMES == set()


def test_comments_cannot_close_or_splice() -> None:
    for text in ("*/", "/*", "???/", "????", "a*\\\n/", "x\u2028y", "*??/\n/"):
        safe = names.comment(text, newlines=True)
        assert "*/" not in safe and "??" not in safe and "\\\n" not in safe
        assert "\n" not in names.comment(text)


def test_c_string_escapes_everything_but_plain_ascii() -> None:
    assert names.c_string('a"b\\?é\n') == '"a\\042b\\134\\077\\303\\251\\012"'


# ---------------------------------------------------------------- end to end

NAMES = """
fn f(int : ℝ[3], return : ℝ[3], NULL : ℝ[3], INFINITY : ℝ[3], __LINE__ : ℝ[3],
     PRESK_RT_H : ℝ[3], presk_exp : ℝ[3], x' : ℝ[3], xu27 : ℝ[3], é : ℝ[3], ue9 : ℝ[3],
     x : (ℝ[3], ℝ[3]), x_0 : ℝ[3], theta : ℝ[3]) -> (ℝ[3], ℝ[3]) =
  let (a, b) = x
  (int + return + NULL + INFINITY + __LINE__ + PRESK_RT_H + presk_exp,
   x' + xu27 + é + ue9 + a + b + x_0 + theta)
fn rt(x : ℝ[2]) -> ℝ[2] = x * 2
fn k0(x : ℝ[2]) -> ℝ[2] = x + 1
fn uniform(x : ℝ[2]) -> ℝ[2] = exp(x)
"""

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")


@pytest.fixture()
def program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "names.psk"
    source.write_text(NAMES, encoding="utf-8")
    return source


def _entries(source: Path) -> list[str]:
    code, _, err = run_presk("check", str(source))
    if code != 0 and ("E0" in err or "E2" in err):
        # A spelling the language itself refuses is not a C name's problem.
        pytest.skip(f"the language refuses a name of this test: {err.strip()[:200]}")
    return ["f", "rt", "k0", "uniform"]


@needs_cc
def test_such_names_run_natively(program: Path) -> None:
    for entry in _entries(program):
        reference = run_presk("run", str(program), "--entry", entry)
        native = run_presk("run", str(program), "--entry", entry, "--backend", "native")
        assert native[0] == 0, native[2]
        assert native[1] == reference[1]


@needs_cc
def test_such_names_export_and_check(program: Path, tmp_path: Path) -> None:
    for entry in _entries(program):
        out = tmp_path / f"export_{entry}"
        code, _, err = run_presk("export", str(program), "--entry", entry, "-o", str(out))
        assert code == 0, err
        check = ["make", "-s", "-C", str(out), "check"]
        built = subprocess.run(check, capture_output=True, text=True, check=False)
        assert built.returncode == 0, built.stdout + built.stderr
        assert "warning" not in built.stderr


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab*/\\?? \t\n\x0b\x0c=(")), max_size=40))
def test_no_comment_text_closes_splices_or_forms_a_trigraph(text: str) -> None:
    for newlines in (False, True):
        body = names.comment(text, newlines=newlines)
        assert "*/" not in body and "/*" not in body and "??" not in body
        assert not re.search(r"\\[ \t\f\v]*(\n|$)", body), repr(body)


def test_a_splicing_directory_name_exports_and_checks(tmp_path: Path) -> None:
    if shutil.which("cc") is None or shutil.which("make") is None:
        pytest.skip("no C compiler or make")
    odd = tmp_path / "y*\\\n"
    odd.mkdir()
    source = odd / "f.psk"
    source.write_text("fn f(x : ℝ[3]) -> ℝ[3] = x * 2\n", encoding="utf-8")
    out = tmp_path / "out"
    code, _, err = run_presk("export", str(source), "--entry", "f", "-o", str(out))
    assert code == 0, err
    made = subprocess.run(["make", "-s", "-C", str(out), "model"], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
