"""Diagnostic rendering: the manual's examples byte for byte, colour, and robustness."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from presk.diagnostics import (
    Diagnostic,
    Label,
    Source,
    Span,
    print_diagnostics,
    render,
    use_color,
)

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def source(path: str, lines: dict[int, str]) -> Source:
    """A source with `lines` at their 1-based numbers and filler elsewhere."""
    last = max(lines)
    text = "".join(lines.get(n, f"-- filler {n}") + "\n" for n in range(1, last + 1))
    return Source(path, text)


def at(src: Source, line: int, col: int, length: int, expect: str | None = None) -> Span:
    """The span of `length` characters from 1-based `line`:`col`."""
    start = src.line_start(line) + col - 1
    span = Span(src, start, start + length)
    if expect is not None:
        assert src.text[span.start : span.end] == expect
    return span


def to_eol(src: Source, line: int, col: int, last_line: int) -> Span:
    """From `line`:`col` to the end of `last_line` (its newline excluded)."""
    start = src.line_start(line) + col - 1
    end = src.line_start(last_line) + len(src.line_text(last_line))
    return Span(src, start, end)


def block(text: str) -> str:
    """An expected rendering written as an indented-free triple-quoted string."""
    return text.removeprefix("\n")


# --- The manual's examples ----------------------------------------------------------------


def test_example_1_single_line_span_with_note() -> None:
    src = source("bad_axis.psk", {3: "  a + b"})
    diag = Diagnostic(
        "E2003",
        "cannot broadcast `ℝ[batch: B, model: 4]` with `ℝ[time: B, model: 4]`",
        Label(at(src, 3, 3, 5, "a + b"), "no alignment by position or by name"),
        note="axes align from the last one, or by name when every axis of the smaller operand"
        " is named",
    )
    assert render(diag) == block("""
[E2003] Error: cannot broadcast `ℝ[batch: B, model: 4]` with `ℝ[time: B, model: 4]`
   ,-[ bad_axis.psk:3:3 ]
   |
 3 |   a + b
   |   ^^|^^
   |     `---- no alignment by position or by name
   |
   | Note: axes align from the last one, or by name when every axis of the smaller operand is named
---'
""")


def test_example_2_warning_wide_gutter_help() -> None:
    line = "fn mse{D : dim}(net : MLP{D, 4*D}, θ : params net, x : ℝ[batch: B, model: D],"
    src = source("tests/examples/mlp/mlp.psk", {26: line})
    diag = Diagnostic(
        "W0001",
        "implicit dimension `B`",
        Label(at(src, 26, 65, 1, "B"), "not declared; taken as a dimension of this function"),
        help="declare it with `dim B` at file level or as a type parameter `{B : dim}`",
    )
    assert render(diag) == block("""
[W0001] Warning: implicit dimension `B`
    ,-[ tests/examples/mlp/mlp.psk:26:65 ]
    |
 26 | fn mse{D : dim}(net : MLP{D, 4*D}, θ : params net, x : ℝ[batch: B, model: D],
    |                                                                 |
    |                                                                 `-- not declared; taken as a dimension of this function
    |
    | Help: declare it with `dim B` at file level or as a type parameter `{B : dim}`
----'
""")  # noqa: E501


def test_example_3_one_character_span() -> None:
    src = source("bad_unbound.psk", {5: "    x · w + c"})
    diag = Diagnostic(
        "E2001",
        "unresolved name `c`",
        Label(
            at(src, 5, 13, 1, "c"),
            "not a variable, parameter, module member or constant in scope",
        ),
    )
    assert render(diag) == block("""
[E2001] Error: unresolved name `c`
   ,-[ bad_unbound.psk:5:13 ]
   |
 5 |     x · w + c
   |             |
   |             `-- not a variable, parameter, module member or constant in scope
---'
""")


def test_example_4() -> None:
    src = source("bad_ret.psk", {5: "    x · w + b"})
    diag = Diagnostic(
        "E2006",
        "dimension mismatch: `In` vs `Out`",
        Label(at(src, 5, 5, 9, "x · w + b"), "differ for In = 1, Out = 0"),
    )
    assert render(diag) == block("""
[E2006] Error: dimension mismatch: `In` vs `Out`
   ,-[ bad_ret.psk:5:5 ]
   |
 5 |     x · w + b
   |     ^^^^|^^^^
   |         `------ differ for In = 1, Out = 0
---'
""")


EXAMPLE_5 = block("""
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
""")


@pytest.mark.parametrize("with_newline", [False, True])
def test_example_5_multi_line_secondary(with_newline: bool) -> None:
    src = source(
        "bad_ret.psk",
        {4: "  fn apply(x : ℝ[..., In]) -> ℝ[..., In] =", 5: "    x · w + b"},
    )
    whole = to_eol(src, 4, 3, 5)
    if with_newline:  # a span that also covers the final newline draws the same
        whole = Span(src, whole.start, whole.end + 1)
    diag = Diagnostic(
        "E2011",
        "`apply` returns `ℝ[..., Out]` but is declared `-> ℝ[..., In]`",
        Label(at(src, 5, 5, 9, "x · w + b"), "this body has type `ℝ[..., Out]`"),
        (Label(whole, "declared `ℝ[..., In]`"),),
    )
    assert render(diag) == EXAMPLE_5


def test_example_6_two_snippets_in_line_order() -> None:
    src = source(
        "bad_argmax.psk",
        {4: "  mean(real(argmax(net.apply(θ, x))))", 6: "  grad(λ θ. hits(net, θ, x))(θ)"},
    )
    diag = Diagnostic(
        "E3001",
        "cannot differentiate through `argmax`: the function is discontinuous (Disc) in `θ`",
        Label(at(src, 6, 3, 26, "grad(λ θ. hits(net, θ, x))"), "`grad` here, with respect to `θ`"),
        (
            Label(
                at(src, 4, 13, 23, "argmax(net.apply(θ, x))"),
                "`argmax` makes the result discontinuous in `θ`",
            ),
        ),
        help="use `softmax` for a smooth surrogate, or an explicit straight-through relaxation",
        note="in `hits_grad`; `grad` requires the class C⁰⁺ or better",
    )
    assert render(diag) == block("""
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
""")


def test_example_7_rail_indents_help() -> None:
    src = source(
        "bad_rand.psk",
        {
            2: "fn pick(key : key, logits : ℝ[batch: B, vocab: 8]) -> idx[8][batch: B] =",
            3: "  sample(key, logits)",
        },
    )
    diag = Diagnostic(
        "E4001",
        "`pick` uses the effect `Rand` without declaring it",
        Label(at(src, 3, 3, 19, "sample(key, logits)"), "this uses `Rand`"),
        (Label(to_eol(src, 2, 1, 3), "declared without `uses`"),),
        help="add `uses Rand` to the signature of `pick`",
    )
    assert render(diag) == block("""
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
""")


EXAMPLE_8 = block("""
[E0010] Error: expected `=`, found identifier `x`
   ,-[ bad_syntax.psk:4:5 ]
   |
 4 |     x · w
   |     |
   |     `-- expected `=` here
---'
""")


@pytest.mark.parametrize("length", [1, 0])
def test_example_8_one_character_and_empty_span(length: int) -> None:
    src = source("bad_syntax.psk", {4: "    x · w"})
    diag = Diagnostic(
        "E0010",
        "expected `=`, found identifier `x`",
        Label(at(src, 4, 5, length), "expected `=` here"),
    )
    assert render(diag) == EXAMPLE_8


def test_example_9_print_diagnostics_concatenates() -> None:
    src = source(
        "tutorial/03_attention.psk",
        {
            4: "const HD : nat = D / H      -- must be exact: checked at elaboration",
            5: "static assert D % H == 0",
        },
    )
    diags = [
        Diagnostic(
            "E1005",
            "`HD` is not a natural number",
            Label(at(src, 4, 18, 5, "D / H"), "evaluates to 8/3"),
            note="constants are evaluated exactly: a division must be exact and the result"
            " non-negative",
        ),
        Diagnostic(
            "E1004",
            "static assertion fails: D % H == 0",
            Label(
                at(src, 5, 1, 24, "static assert D % H == 0"),
                "`D % H == 0` is false with the constants of this file",
            ),
        ),
    ]
    out = io.StringIO()
    print_diagnostics(diags, out)
    assert out.getvalue() == block("""
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
""")


# --- Cases without an example in the manual -----------------------------------------------


def test_runtime_error_is_one_header_line() -> None:
    assert render(Diagnostic("E9001", "index 7 out of range for axis `vocab` of size 4")) == (
        "[E9001] Error: index 7 out of range for axis `vocab` of size 4\n"
    )


def test_multi_line_primary_draws_a_rail() -> None:
    src = Source("f.psk", "fn f(x : ℝ) -> ℝ =\n  x + 1\n")
    diag = Diagnostic("E2011", "bad function", Label(to_eol(src, 1, 1, 2), "this function"))
    assert render(diag) == block("""
[E2011] Error: bad function
   ,-[ f.psk:1:1 ]
   |
 1 | ,-> fn f(x : ℝ) -> ℝ =
 2 | |->   x + 1
   | |
   | `------------- this function
---'
""")


def test_long_multi_line_span_elides_its_middle() -> None:
    body = [f"  let v{n} = {n}" for n in range(20)]
    src = Source("long.psk", "\n".join(["fn long() =", *body, "  v0"]) + "\n")
    diag = Diagnostic("E2011", "long", Label(to_eol(src, 1, 1, 22), "here"))
    text = render(diag)
    assert "    : |" in text.splitlines()
    assert " 1 | ,-> fn long() =" in text
    assert " 22 | |->   v0" in text
    assert len(text.splitlines()) < 15


def test_two_labels_on_one_line() -> None:
    src = Source("two.psk", "  a + foo(b)\n")
    diag = Diagnostic(
        "E2003",
        "two",
        Label(at(src, 1, 3, 5, "a + f"), "left"),
        (Label(at(src, 1, 9, 4, "o(b)"), "right"),),
    )
    assert render(diag) == block("""
[E2003] Error: two
   ,-[ two.psk:1:3 ]
   |
 1 |   a + foo(b)
   |   ^^|^^ ^^|^
   |     |     `--- right
   |     `--------- left
---'
""")


def test_tab_counts_as_one_column() -> None:
    src = Source("tab.psk", "\tx + y\n")
    diag = Diagnostic("E2001", "tab", Label(at(src, 1, 2, 1, "x"), "here"))
    assert render(diag).splitlines()[3:5] == [" 1 |  x + y", "   |  |"]


@pytest.mark.parametrize("text", ["", "a", "a\n", "a\nbc\n", "\n\n"])
def test_span_at_end_of_file_points_at_last_line_end(text: str) -> None:
    src = Source("eof.psk", text)
    diag = Diagnostic(
        "E0001", "unexpected end of file", Label(Span(src, len(text), len(text)), "here")
    )
    lines = render(diag).splitlines()
    last = max(src.line_count, 1)
    col = len(src.line_text(last)) + 1
    assert lines[1] == f"   ,-[ eof.psk:{last}:{col} ]"
    assert lines[4] == "   | " + " " * (col - 1) + "|"


def test_secondary_in_another_source_gets_its_own_section() -> None:
    a = Source("a.psk", "use b\nf(x)\n")
    b = Source("b.psk", "fn f(y : nat) = y\n")
    diag = Diagnostic(
        "E2006",
        "mismatch",
        Label(at(a, 2, 1, 4, "f(x)"), "called here"),
        (Label(at(b, 1, 6, 7, "y : nat"), "declared here"),),
    )
    text = render(diag)
    assert "   ,-[ a.psk:2:1 ]" in text
    assert "   |-[ b.psk:1:6 ]" in text
    assert text.endswith("---'\n")


def test_color_wraps_header_and_labels_only() -> None:
    src = source("bad_axis.psk", {3: "  a + b"})
    diag = Diagnostic("E2003", "msg", Label(at(src, 3, 3, 5), "label"), note="n")
    colored = render(diag, color=True)
    assert colored.startswith("\x1b[1;31m[E2003] Error:\x1b[0m msg\n")
    assert "\x1b[31m" in colored
    assert ANSI.sub("", colored) == render(diag)
    assert "\x1b" not in render(diag)
    warn = Diagnostic("W0001", "msg", Label(at(src, 3, 3, 5), "label"))
    assert render(warn, color=True).startswith("\x1b[1;33m[W0001] Warning:\x1b[0m")


class _Tty(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def test_use_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_color(_Tty(True))
    assert not use_color(_Tty(False))
    monkeypatch.setenv("NO_COLOR", "")
    assert use_color(_Tty(True))
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(_Tty(True))
    closed = io.StringIO()
    closed.close()  # isatty() raises ValueError on a closed stream
    monkeypatch.delenv("NO_COLOR")
    assert not use_color(closed)


def test_print_diagnostics_colors_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    out = _Tty(True)
    print_diagnostics([Diagnostic("E9001", "boom")], out)
    assert out.getvalue() == "\x1b[1;31m[E9001] Error:\x1b[0m boom\n"


# --- Properties ---------------------------------------------------------------------------

texts = st.text(
    alphabet=st.one_of(st.sampled_from("\n\t \r·θℝx(){}"), st.characters()), max_size=80
)


@st.composite
def diagnostics(draw: st.DrawFn) -> Diagnostic:
    src = Source("p.psk", draw(texts))
    n = len(src.text)

    def span() -> Span:
        # Mostly in range, sometimes reversed or outside the text: never a crash.
        a = draw(st.integers(-2, n + 2))
        b = draw(st.integers(-2, n + 2))
        if draw(st.booleans()):
            a, b = sorted((min(max(a, 0), n), min(max(b, 0), n)))
        return Span(src, a, b)

    words = st.text(max_size=20)
    primary = Label(span(), draw(words))
    secondary = tuple(Label(span(), draw(words)) for _ in range(draw(st.integers(0, 4))))
    code = draw(st.sampled_from(["E2003", "W0001"]))
    help_ = draw(st.none() | words)
    note = draw(st.none() | words)
    return Diagnostic(code, draw(words), primary, secondary, help_, note)


@settings(max_examples=400, deadline=None)
@given(diagnostics(), st.booleans())
def test_render_never_crashes(diag: Diagnostic, color: bool) -> None:
    text = render(diag, color)
    assert text.endswith("---'\n") or text.endswith("----'\n") or text.endswith("-'\n")
    # Only the renderer's own escapes: control characters in texts are blanked.
    if color:
        assert ANSI.sub("", text) == render(diag)
    else:
        assert "\x1b" not in text


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab θ·\t", max_size=12), min_size=1, max_size=12), st.data())
def test_underline_sits_under_the_span(lines: list[str], data: st.DataObject) -> None:
    src = Source("p.psk", "\n".join(lines) + "\n")
    line = data.draw(st.integers(1, len(lines)))
    width = len(lines[line - 1])
    col = data.draw(st.integers(1, width + 1))
    length = data.draw(st.integers(1, width + 2 - col))
    start = src.line_start(line) + col - 1
    diag = Diagnostic("E0001", "m", Label(Span(src, start, start + length), "t"))
    out = render(diag).splitlines()
    gutter = len(str(line))
    under = out[4][gutter + 4 :]
    mark = length // 2
    assert under == " " * (col - 1) + "^" * mark + "|" + "^" * (length - mark - 1)
