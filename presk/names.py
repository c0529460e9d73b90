"""Names and text from the program, made safe for C: identifiers, comments, string literals.

A ground-floor module (it imports nothing from presk). Nothing the user wrote
reaches generated C except through these functions.

Identifiers come in two kinds:

* Generated names carry a fixed prefix and a number that makes them unique
  (`presk_f3_`, `presk_k0`, `t5_`, `in2`, `p4a`); `hint` only appends a
  readable trace of the program's name to them, and need not be injective.
* Names that are the user's own — the entry's symbol, the fields of its
  input and output structs — are chosen by `ident`, `fields` and
  `entry_symbol`, which are injective and never give a C keyword, a macro
  of C or of the runtime, a reserved identifier or a name of our namespace.

Every such name is either *plain* or *escaped*. A plain name is the one the
program would expect (`theta_blocks_proj_w`, `q`): letters and digits in
runs joined by single underscores, not starting with `_` or a digit, and
not reserved. Everything else is escaped, into `x__` followed by each path
component, components separated by `__`, where a letter or digit stands for
itself, `_` is `_1` and any other character is `_x<hex>_` (its code point).
Plain names contain no `__` and escaped ones always do, so the two kinds
never meet; an escaped name decodes left to right without ambiguity, so
distinct paths give distinct names (tests/test_names.py decodes them).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# C89 to C23, and the GNU spellings a -std=gnu* build would add.
C_KEYWORDS = _words(
    """
    auto break case char const continue default do double else enum extern float for goto
    if inline int long register restrict return short signed sizeof static struct switch
    typedef union unsigned void volatile while _Alignas _Alignof _Atomic _BitInt _Bool
    _Complex _Decimal128 _Decimal32 _Decimal64 _Generic _Imaginary _Noreturn _Static_assert
    _Thread_local alignas alignof bool constexpr false nullptr static_assert thread_local
    true typeof typeof_unqual asm
    """
)

# Macros (object-like or function-like) of the headers a generated unit or an
# export's main.c includes, and the GNU mode's predefined ones. A member named
# like a macro would be rewritten by the preprocessor.
C_MACROS = _words(
    """
    NULL offsetof INFINITY NAN HUGE_VAL HUGE_VALF HUGE_VALL MATH_ERRNO MATH_ERREXCEPT
    math_errhandling isnan isinf isfinite isnormal signbit fpclassify isgreater
    isgreaterequal isless islessequal islessgreater isunordered EOF BUFSIZ FILENAME_MAX
    FOPEN_MAX L_tmpnam TMP_MAX stdin stdout stderr EXIT_SUCCESS EXIT_FAILURE RAND_MAX
    MB_CUR_MAX CLOCKS_PER_SEC errno unix linux i386 HUGE MAXFLOAT DOMAIN SING OVERFLOW
    UNDERFLOW TLOSS PLOSS X_TLOSS
    """
)

# All-capital families of standard macros: INT8_MAX, UINT64_C, FP_NAN, M_PI, EDOM, PRIx64 …
_MACRO_FAMILIES = re.compile(
    r"[A-Z0-9_]+_(?:MIN|MAX|C|WIDTH|EPSILON|DIG|BIT)|(?:FP|M|LC|SEEK|SIG|CLOCK|TIME|_IO)_\w*"
    r"|E[A-Z0-9]+|(?:PRI|SCN)\w+|SIG[A-Z]+"
)

# Every identifier of our namespace the runtime and libm define (tests/test_names.py
# checks this list against runtime/c/ and libm/), and the kernels' own locals.
RUNTIME_NAMES = _words(
    """
    PRESK_DATA_H PRESK_DATA_VERSION PRESK_DERIVE_TAG PRESK_DT_BF16 PRESK_DT_F32 PRESK_DT_F64
    PRESK_DT_I64 PRESK_FNV64_OFFSET PRESK_FNV64_PRIME PRESK_LIBM_CONST PRESK_LIBM_FN PRESK_LIBM_H
    PRESK_LIBM_PRIVATE
    PRESK_PHILOX_M0 PRESK_PHILOX_M1 PRESK_PHILOX_ROUNDS PRESK_PHILOX_W0 PRESK_PHILOX_W1
    PRESK_RNG_H PRESK_RNG_NO_INT128 PRESK_RT_H presk_arena presk_bf16_to_f32 presk_block
    presk_cos presk_cosf presk_data presk_data_free presk_data_read presk_data_write
    presk_derive presk_derive_n presk_dtype_size presk_erf presk_erff presk_exp presk_expf
    presk_f32_to_bf16 presk_fnv1a64 presk_key presk_key_for presk_key_from_seed presk_leaf
    presk_libm presk_log presk_logf presk_mulhi64 presk_philox presk_randbelow presk_rng
    presk_rt presk_sin presk_sinf presk_tanh presk_tanhf presk_u128 presk_u32 presk_u64
    presk_uniform presk_v16f presk_v8d presk_v8f presk_v4d presk_v2d presk_v4f presk_w presk_t
    presk_l presk_lb presk_lany
    PRESK_LANES_F32 PRESK_LANES_F64 presk_erf_lanes presk_erff_lanes presk_exp_lanes
    presk_expf_lanes presk_log_lanes presk_logf_lanes presk_tanh_lanes presk_tanhf_lanes
    """
)

# Generated global names: kernels `presk_k<n>`, function instances `presk_f<n>_<hint>`.
_GENERATED = re.compile(r"presk_(?:k\d+|f\d+(?:_\w*)?)")

_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*")
ESCAPE_PREFIX = "x"


def is_reserved(name: str) -> bool:
    """Whether a C name may not be the user's: a keyword, a macro, reserved, ours."""
    return (
        name in C_KEYWORDS
        or name in C_MACROS
        or name.startswith("_")
        or "__" in name
        or name.lower().startswith("presk_")
        or _MACRO_FAMILIES.fullmatch(name) is not None
    )


def is_plain(name: str) -> bool:
    """Whether a C name can stand for itself: the plain form, not reserved."""
    return _PLAIN.fullmatch(name) is not None and not is_reserved(name)


def _escape(component: str) -> str:
    out = []
    for ch in component:
        if ch.isascii() and ch.isalnum():
            out.append(ch)
        elif ch == "_":
            out.append("_1")
        else:
            out.append(f"_x{ord(ch):x}_")
    return "".join(out)


def escaped(path: Sequence[str]) -> str:
    """The escaped name of a path of program names (never plain; injective)."""
    return ESCAPE_PREFIX + "".join("__" + _escape(c) for c in path)


def ident(name: str) -> str:
    """One program name as a C identifier: itself when plain, else escaped."""
    return name if is_plain(name) else escaped((name,))


def _spelled(component: str) -> str:
    # θ, the conventional name of parameters, reads as `theta` in C.
    return "theta" if component == "θ" else component


def fields(paths: Sequence[tuple[str, ...]]) -> list[str]:
    """Struct member names for distinct paths (a parameter's name, then its leaf's path).

    A path's plain name is its components joined by `_` (`theta_blocks_w`,
    `x_0`); it is used when it is plain and no other path of the struct has
    it, else the path is escaped.
    """
    if len(set(paths)) != len(paths):
        raise ValueError("fields of a struct need distinct paths")
    short = [c_name(".".join(_spelled(c) for c in path)) for path in paths]
    count = Counter(short)
    return [
        s if count[s] == 1 and is_plain(s) else escaped(path)
        for s, path in zip(short, paths, strict=True)
    ]


def entry_symbol(entry: str) -> str:
    """The C symbol of an entry, `presk_<name>`, clear of the runtime's and generated names.

    The symbol also names `<symbol>_in`, `<symbol>_out`, and in an export the
    macros `<SYMBOL>_H` and `<SYMBOL>_ARENA_BYTES`.
    """
    short = c_name(entry)
    symbol = "presk_" + short
    derived = (
        symbol,
        symbol + "_in",
        symbol + "_out",
        symbol.upper() + "_H",
        symbol.upper() + "_ARENA_BYTES",
    )
    clash = any(d in RUNTIME_NAMES for d in derived) or _GENERATED.fullmatch(symbol)
    if "__" in short or short.startswith("_") or clash:
        return "presk_" + escaped((entry,))
    return symbol


def c_name(text: str) -> str:
    """A dotted path or name in C identifier characters (dots as `_`): the plain spelling.

    Not injective (`x'` and `xu27` meet): `fields` and `entry_symbol` use it only
    where they check that it stands alone.
    """
    out = []
    for ch in text:
        if ch.isascii() and (ch.isalnum() or ch == "_"):
            out.append(ch)
        elif ch == ".":
            out.append("_")
        else:
            out.append(f"u{ord(ch):x}")
    name = "".join(out) or "x"
    return name if not name[0].isdigit() else "_" + name


def hint(name: str) -> str:
    """A readable trace of a program name, appended to a generated, already unique name."""
    out = []
    for ch in name:
        if ch.isascii() and (ch.isalnum() or ch == "_"):
            out.append(ch)
        elif ch in ".[]{},= ":
            out.append("_")
        else:
            out.append(f"u{ord(ch):x}")
    return "".join(out).strip("_") or "fn"


_SPLICE = re.compile(r"\\(?=[ \t\f\v]*(?:\n|\Z))")


def comment(text: str, newlines: bool = False) -> str:
    """Text that can sit inside `/* */` whatever the program named things.

    `*/` and `/*` are broken apart; no `??` is left, so no trigraph forms
    (`??/` would splice lines under -trigraphs, which -std=c11 implies); a
    backslash never ends a line, so no splice joins `*` and `/`; unprintable
    characters (newlines too, unless `newlines`) become `?`.
    """
    text = "".join(ch if ch.isprintable() or (newlines and ch == "\n") else "?" for ch in text)
    # Compilers splice a backslash followed by blanks and a newline, so such a
    # backslash (or one at the very end) is no backslash at all.
    text = _SPLICE.sub("?", text)
    text = text.replace("*/", "* /").replace("/*", "/ *")
    while "??" in text:
        text = text.replace("??", "? ?")
    return text


def c_string(text: str) -> str:
    """A C string literal of any text: non-ASCII and specials as octal escapes."""
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        if 32 <= byte < 127 and ch not in '"\\?':
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


__all__ = [
    "C_KEYWORDS",
    "C_MACROS",
    "RUNTIME_NAMES",
    "c_name",
    "c_string",
    "comment",
    "entry_symbol",
    "escaped",
    "fields",
    "hint",
    "ident",
    "is_plain",
    "is_reserved",
]
