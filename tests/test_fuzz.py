"""Property tests: no input makes the front end crash.

Random strings of the language's tokens and of arbitrary Unicode, and random mutations
of the tutorial programs, the diagnostic cases and the examples (tokens or characters
deleted, duplicated, swapped or inserted), go through `presk check` (and a few other
front-end commands) in process, with PRESK_DEBUG=1 so that an unexpected exception
escapes instead of becoming a one-line "internal error". Every outcome must be an exit
code 0, 1 or 2 with no exception escaping, no traceback and no internal error; a program
is either accepted or rejected with diagnostics. The lexer and parser are also driven
directly on random token streams.

`PRESK_FUZZ_SCALE=N` multiplies the number of examples (for a longer hunt).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from conftest import REPO_ROOT, run_presk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from presk.diagnostics import Sink, Source, render
from presk.syntax.lexer import lex
from presk.syntax.parser import parse, parse_expression
from presk.syntax.tokens import KEYWORDS, Kind

TUTORIAL = REPO_ROOT / "tutorial"
TUTORIAL_FILES = sorted(p.name for p in TUTORIAL.glob("*.psk"))
SCALE = max(1, int(os.environ.get("PRESK_FUZZ_SCALE", "1")))


def examples(n: int) -> int:
    return n * SCALE


FUZZ_SETTINGS = dict(
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# --- the language's vocabulary ---------------------------------------------------------------

# Every spelling of every operator and punctuation token (split at blanks).
PUNCT = """
    ... -> == != <= >= |> ≤ ≥ ≠ → − ( ) [ ] { } , : . = < > + - * / % ^ · @ λ ℝ \\
""".split()  # noqa: SIM905
WORDS = [
    *KEYWORDS,
    *"""
    x y w b θ ŷ σ² key net nat int f64 f32 init zeros ones xavier_uniform stream checkpoint
    every steps to Rand B T D H In Out batch model seq seq2 heads hd Linear RMSNorm Block
    Tower lin norm apply params softmax mean sum max exp log sqrt tanh gelu relu argmax sample
    real embed one_hot causal_mask positions merge split split_heads merge_heads
    cross_entropy dropout ein grad where eps
    """.split(),  # noqa: SIM905
]
NUMBERS = ["0", "1", "2", "3", "4", "8", "1024", "1e-6", "0.5", "2.0", "1e3", "007", "10"]
STRINGS = ['"01_linear.psk"', '"02_norm.psk"', '"06_tower.psk"', '"x"', '""', '"data/p.psk.d"']
LAYOUT = ["\n", "\n  ", "\n    ", " ", "  ", "\t", "-- comment\n", "\r\n"]
# A few whole fragments that reach deep into the checker.
FRAGMENTS = [
    "fn f(x : ℝ[4]) -> ℝ[4] =\n  ",
    "fn g{A : dim}(x : ℝ[..., A]) -> ℝ[..., A] =\n  ",
    "module M{D : dim} {\n  param w : ℝ[D, D]  init = zeros\n  fn apply(x : ℝ[..., D]) -> ℝ[..., D] =\n    ",  # noqa: E501
    "const N : nat = ",
    "static assert ",
    "dim B\n",
    "dim T <= 16\n",
    "type Q = ℝ[batch: B, seq: T]\n",
    'import "01_linear.psk" as lin\n',
    "let z = ",
    "grad(λ θ. ",
    "ein[batch, seq](",
    "softmax(axis seq, ",
    "mean(axis model, ",
    "(N : ℝ)",
    "stack{3}(",
    "use blocks : stack{2}(Block)\n",
    "}\n",
]

token = st.sampled_from(PUNCT + WORDS + NUMBERS + STRINGS + LAYOUT + FRAGMENTS)
unicode_char = st.characters(blacklist_categories=("Cs",))
piece = st.one_of(token, token, token, st.text(unicode_char, min_size=1, max_size=3))
program = st.lists(piece, max_size=60).map(lambda parts: " ".join(parts))


# --- helpers ---------------------------------------------------------------------------------


# Seeds for mutation: the tutorial, the diagnostic cases and the examples, each written
# back next to its original (in a copy of the tree) so that its imports resolve.
SEED_DIRS = ["tutorial", "tests/diag", "tests/examples", "tests/ad"]
SEEDS: list[tuple[str, str]] = sorted(
    (str(path.parent.relative_to(REPO_ROOT)), path.read_text(encoding="utf-8"))
    for folder in SEED_DIRS
    for path in (REPO_ROOT / folder).rglob("*.psk")
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the seed folders, so that a mutated seed's imports resolve."""
    root = tmp_path_factory.mktemp("fuzz")
    for folder in SEED_DIRS:
        if (REPO_ROOT / folder).is_dir():
            shutil.copytree(REPO_ROOT / folder, root / folder)
    return root


COMMANDS: list[tuple[str, ...]] = [
    ("check",),
    ("check", "--summary"),
    ("dump", "--stage", "tokens"),
    ("dump", "--stage", "ast"),
    ("dump", "--stage", "elab"),
    ("dump", "--stage", "core"),
]


def run_on(
    workdir: Path, text: str, command: tuple[str, ...] = ("check",), folder: str = "tutorial"
) -> None:
    """Run a front-end command on `text`; fail on a crash, a traceback or a bad exit code.

    The text is written as `<folder>/fuzz_case.psk` in the work directory, and presk runs
    from the work directory, as it would from the repository root.
    """
    path = workdir / folder / "fuzz_case.psk"
    path.write_text(text, encoding="utf-8")
    try:
        code, _, err = run_presk(
            command[0], f"{folder}/fuzz_case.psk", *command[1:], cwd=workdir, debug=True
        )
    except Exception as error:
        if known_crash(error, command):
            return  # reported, with its own xfail regression test below; keep hunting
        raise AssertionError(
            f"`presk {' '.join(command)}` raised {type(error).__name__}: {error}\ninput: {text!r}"
        ) from error
    assert code in (0, 1, 2), f"exit code {code} for input {text!r}"
    assert "Traceback" not in err, f"traceback for input {text!r}:\n{err}"
    assert "internal error" not in err, f"internal error for input {text!r}:\n{err}"
    if code == 1 and command[0] == "check":
        assert err.strip(), f"exit 1 without a message for input {text!r}"
    if code == 0 and command[0] == "check":
        assert "Error:" not in err, f"exit 0 with an error for input {text!r}:\n{err}"


# --- crashes already known -------------------------------------------------------------------
#
# Each entry matches an exception escaping `presk.cli.main`: its type and a (file, function)
# that must appear in its traceback. Each has an xfail regression test at the end of this
# file with the minimal input; when a fix lands, that test passes (XPASS) and the entry here
# should be removed so the fuzzers guard the fix.

KNOWN_CRASHES: list[tuple[str, type[BaseException], set[tuple[str, str]], str | None]] = []


def known_crash(error: BaseException, command: tuple[str, ...]) -> bool:
    import traceback

    frames = {
        (os.path.basename(f.filename), f.name) for f in traceback.extract_tb(error.__traceback__)
    }
    for _, kind, where, stage in KNOWN_CRASHES:
        if isinstance(error, kind) and frames & where and (stage is None or stage in command):
            return True
    return False


# --- (a) random token soup -------------------------------------------------------------------


@settings(max_examples=examples(300), **FUZZ_SETTINGS)
@given(text=program)
def test_random_programs_do_not_crash(workdir: Path, text: str) -> None:
    run_on(workdir, text)


@settings(max_examples=examples(100), **FUZZ_SETTINGS)
@given(text=program, command=st.sampled_from(COMMANDS))
def test_random_programs_other_commands(workdir: Path, text: str, command: tuple[str, ...]) -> None:
    run_on(workdir, text, command)


@settings(max_examples=examples(100), **FUZZ_SETTINGS)
@given(text=st.text(unicode_char, max_size=200))
def test_random_unicode_does_not_crash(workdir: Path, text: str) -> None:
    run_on(workdir, text)


# --- (b) mutations of the tutorial programs --------------------------------------------------

# Lexical pieces of a source: words, numbers, strings, comments, runs of blanks, single
# other characters. Joined back they give the text exactly.
PIECE = re.compile(r'--[^\n]*|"[^"\n]*"?|\w+|\.\.\.|->|==|!=|<=|>=|\|>|\n|[ \t]+|.', re.UNICODE)


def pieces(text: str) -> list[str]:
    parts = PIECE.findall(text)
    assert "".join(parts) == text
    return parts


@st.composite
def mutated_seed(draw: st.DrawFn) -> tuple[str, str]:
    """(folder, text): a seed program with one to four random mutations."""
    folder, text = draw(st.sampled_from(SEEDS))
    parts = pieces(text)
    for _ in range(draw(st.integers(1, 4))):
        if not parts:
            parts = [""]
        i = draw(st.integers(0, len(parts) - 1))
        op = draw(
            st.sampled_from(
                ["delete", "duplicate", "swap", "insert", "replace", "char_delete", "char_insert"]
            )
        )
        if op == "delete":
            del parts[i]
        elif op == "duplicate":
            parts.insert(i, parts[i])
        elif op == "swap":
            j = draw(st.integers(0, len(parts) - 1))
            parts[i], parts[j] = parts[j], parts[i]
        elif op == "insert":
            parts.insert(i, draw(token))
        elif op == "replace":
            parts[i] = draw(st.one_of(token, st.text(unicode_char, min_size=1, max_size=2)))
        elif op == "char_delete" and parts[i]:
            k = draw(st.integers(0, len(parts[i]) - 1))
            parts[i] = parts[i][:k] + parts[i][k + 1 :]
        elif op == "char_insert":
            k = draw(st.integers(0, len(parts[i])))
            parts[i] = parts[i][:k] + draw(unicode_char) + parts[i][k:]
    return folder, "".join(parts)


@settings(max_examples=examples(400), **FUZZ_SETTINGS)
@given(case=mutated_seed())
def test_mutated_tutorials_do_not_crash(workdir: Path, case: tuple[str, str]) -> None:
    folder, text = case
    run_on(workdir, text, folder=folder)


@settings(max_examples=examples(100), **FUZZ_SETTINGS)
@given(case=mutated_seed(), command=st.sampled_from(COMMANDS))
def test_mutated_tutorials_other_commands(
    workdir: Path, case: tuple[str, str], command: tuple[str, ...]
) -> None:
    folder, text = case
    run_on(workdir, text, command, folder)


@settings(max_examples=examples(100), **FUZZ_SETTINGS)
@given(
    case=mutated_seed(),
    const=st.sampled_from(["D", "H", "L", "HD"]),
    value=st.sampled_from(["0", "1", "3", "5", "1/2", "-1", "0.25", "1000000"]),
)
def test_mutated_tutorials_with_const(
    workdir: Path, case: tuple[str, str], const: str, value: str
) -> None:
    folder, text = case
    run_on(workdir, text, ("check", "--const", f"{const}={value}"), folder)


@pytest.mark.parametrize("name", TUTORIAL_FILES)
@pytest.mark.parametrize("value", ["0", "1", "3", "7", "1/2", "-2", "100"])
def test_tutorial_const_overrides(workdir: Path, name: str, value: str) -> None:
    """Every constant of every tutorial, overridden with odd values."""
    text = (TUTORIAL / name).read_text(encoding="utf-8")
    for const in ("D", "H", "HD", "L"):
        if re.search(rf"^const {const}\b", text, re.MULTILINE):
            run_on(workdir, text, ("check", "--summary", "--const", f"{const}={value}"))


def test_every_tutorial_prefix(workdir: Path) -> None:
    """Each tutorial cut after every token: a truncated file never crashes the front end."""
    for name in TUTORIAL_FILES:
        parts = pieces((TUTORIAL / name).read_text(encoding="utf-8"))
        for end in range(len(parts) + 1):
            run_on(workdir, "".join(parts[:end]))


def test_every_tutorial_token_deleted(workdir: Path) -> None:
    """Each tutorial with each single non-blank piece deleted."""
    for name in TUTORIAL_FILES:
        parts = pieces((TUTORIAL / name).read_text(encoding="utf-8"))
        for i, part in enumerate(parts):
            if part.strip():
                run_on(workdir, "".join(parts[:i] + parts[i + 1 :]))


# --- the lexer and parser alone --------------------------------------------------------------


@settings(max_examples=examples(500), **FUZZ_SETTINGS)
@given(text=program)
def test_lexer_and_parser_direct(text: str) -> None:
    source = Source("fuzz.psk", text)
    sink = Sink()
    tokens = lex(source, sink)
    assert tokens and tokens[-1].kind == Kind.EOF
    assert sum(t.kind == Kind.EOF for t in tokens) == 1
    previous_end = 0
    for t in tokens:
        assert 0 <= t.span.start <= t.span.end <= len(text)
        assert t.span.start >= previous_end, "tokens overlap or go backwards"
        previous_end = t.span.end
        t.dump()  # byte offsets must be computable
    for i in range(1, len(tokens)):
        assert not (tokens[i].kind == tokens[i - 1].kind == Kind.NEWLINE)
    parse(source, sink)
    for diag in sink.diagnostics:
        assert diag.code[0] in "EW"
        text_out = render(diag)
        assert text_out.endswith("---'\n")


@settings(max_examples=examples(300), **FUZZ_SETTINGS)
@given(text=program)
def test_parse_expression_direct(text: str) -> None:
    sink = Sink()
    result = parse_expression(Source("<expr>", text), sink)
    if result is None:
        assert sink.has_errors
    for diag in sink.diagnostics:
        render(diag)


# --- crashes found by fuzzing and by hand, since fixed: regression tests ----------------------


def _crashes(workdir: Path, text: str, *command: str) -> None:
    """Assert that `presk COMMAND` on `text` does not crash (exit 0/1/2, no traceback)."""
    path = workdir / "tutorial" / "known_case.psk"
    path.write_text(text, encoding="utf-8")
    code, _, err = run_presk(
        command[0], "tutorial/known_case.psk", *command[1:], cwd=workdir, debug=True
    )
    assert code in (0, 1, 2)
    assert "Traceback" not in err
    assert "internal error" not in err


def test_known_recursive_alias(workdir: Path) -> None:
    _crashes(workdir, "type A = A\nfn f(x : A) -> ℝ[] =\n  mean(x)\n", "check")


def test_known_module_containing_itself(workdir: Path) -> None:
    text = "module M {\n  use s : M\n}\n"
    _crashes(workdir, text, "dump", "--stage", "elab")
    code, _, _ = run_presk("check", "tutorial/known_case.psk", cwd=workdir)
    assert code == 1, "a module containing itself has an infinite parameter tree"


@pytest.mark.parametrize("nest", ["(" * 3000 + "1" + ")" * 3000, "- " * 3000 + "1"])
def test_known_deep_nesting(workdir: Path, nest: str) -> None:
    _crashes(workdir, f"const N : nat = {nest}\n", "check")


def test_known_zero_to_negative_power(workdir: Path) -> None:
    _crashes(workdir, "const N : nat = 0^-1\n", "check")


@pytest.mark.parametrize(
    "text",
    [
        "type Q = ℝ[Z]\n",
        "module M {\n  param w : ℝ[In]  init = zeros\n}\n",
    ],
)
def test_known_elab_dump_of_unchecked_declaration(workdir: Path, text: str) -> None:
    _crashes(workdir, text, "dump", "--stage", "elab")
    code, _, err = run_presk("check", "tutorial/known_case.psk", cwd=workdir)
    assert code == 1 and "[E2001]" in err


# --- crashes found by fuzzing and since fixed: keep them fixed --------------------------------


@pytest.mark.parametrize("text", [".", "...", "x", "fn", "-- comment", "module M {"])
def test_dump_tokens_without_final_newline(workdir: Path, text: str) -> None:
    """The last line's end-of-line token once had a span past the end of the text."""
    _crashes(workdir, text, "dump", "--stage", "tokens")
    _, out, _ = run_presk("dump", "tutorial/known_case.psk", "--stage", "tokens", cwd=workdir)
    n = len(text.encode("utf-8"))
    assert out.splitlines()[-1] == f"Eof @ {n}..{n}"


@pytest.mark.parametrize(
    "text",
    [
        # A `use` of an unknown module, reached from a function body.
        "module B {\n  use proj : nope.Linear{4, 4}\n  fn apply(x : ℝ[4]) -> ℝ[4] =\n"
        "    proj.apply(x)\n}\n",
        # A parameter whose type names an undeclared dimension, reached from a body.
        "module M {\n  param w : ℝ[In]  init = zeros\n  fn apply(x : ℝ[4]) -> ℝ[4] =\n"
        "    x * w\n}\n",
        # An unused `use` of an unknown module.
        "module M {\n  use s : nope.Linear{4, 4}\n}\n",
    ],
)
def test_broken_member_declaration_is_a_diagnostic(workdir: Path, text: str) -> None:
    for command in COMMANDS:
        _crashes(workdir, text, *command)
    code, _, err = run_presk("check", "tutorial/known_case.psk", cwd=workdir)
    assert code == 1 and "[E2001]" in err
