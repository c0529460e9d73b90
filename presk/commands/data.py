"""`presk data pack|info|diff`: make and inspect `.psk.d` files from the command line.

* `pack --type T FILE.txt -o F.psk.d [--real f64|f32|bf16]`: one sample a line, the
  numbers of the sample's leaves in storage order, whitespace-separated; blank lines and
  lines starting with `#` are skipped. Reals are decimal (rounded to f64, then to the
  stored type), indices integers in [0, bound), booleans `true`/`false`/`1`/`0`. `FILE.txt`
  may be `-` for standard input.
* `info F [--samples N] [--digits D]`: the header, each leaf, and the first N samples
  (abbreviated: at most 8 items per bracket).
* `diff A B`: ‖a − b‖₂, ‖a‖₂ and their ratio over every real of the two files, which must
  agree in type, count, leaf paths and shapes (their real dtypes may differ: comparing an
  f32 file with its f64 reference is the point).
* `chars TEXT -o V.json`, `encode TEXT --vocab V.json -o T.txt`, `lm-windows --vocab N
  --seq T T.txt -o W.psk.d`: a UTF-8 text as a character vocabulary, token ids and
  next-token windows (the logic is presk/data/text.py), each with a one-line summary.

Exit codes, as everywhere in presk: 0 success; 1 a problem with a file (missing, corrupt,
a malformed line), always one line `presk data: …` on stderr; 2 a usage error (a bad
`--type`, a bad flag value), raised as `UsageError`.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from typing import Any

import numpy as np
import numpy.typing as npt

from presk.commands.common import check_out_file, guard
from presk.data import text
from presk.data.format import (
    VERSION,
    DataError,
    DataFile,
    Leaf,
    TypeTextError,
    as_f64,
    leaf_layout,
    leaf_types,
    leaf_values,
    parse_sample_type,
    read,
    reals_as,
    tensor_types,
    write,
)
from presk.data.text import TextError
from presk.diagnostics import UsageError
from presk.elab.ty import Elem, lin_int
from presk.interp.tensor import Kind, Tensor, format_axes, format_number

NAME = "data"
HELP = "Produce and inspect `.psk.d` data files"

ITEMS_SHOWN = 8
"""`info` shows at most this many items per bracket, then `...`."""

_INT = re.compile(r"[+-]?[0-9]+\Z")
# What `float` accepts minus its extras (underscores, surrounding space): a decimal with
# an optional exponent, or inf / infinity / nan with a sign.
_REAL = re.compile(r"[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|inf|infinity|nan)\Z", re.I)


class _Failure(Exception):
    """A problem with the user's files: one line, exit 1."""


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from presk.commands.common import Parser

    data = sub.add_parser(NAME, help=HELP, description=HELP)
    actions = data.add_subparsers(
        dest="data_command", metavar="<action>", parser_class=Parser, required=True
    )
    pack = actions.add_parser("pack", help="a text file, one sample a line, into a .psk.d file")
    pack.add_argument("input", metavar="FILE.txt", help="one sample a line; `-` for stdin")
    pack.add_argument("--type", required=True, help="the sample type, e.g. `(ℝ[4], ℝ[4])`")
    pack.add_argument("-o", dest="output", required=True, metavar="F.psk.d", help="the output")
    pack.add_argument("--real", choices=("f64", "f32", "bf16"), default="f64", help="reals as")
    info = actions.add_parser("info", help="the header, the leaves and the first samples")
    info.add_argument("file", metavar="F.psk.d")
    info.add_argument("--samples", default="3", help="samples shown (default 3)")
    info.add_argument("--digits", default="6", help="significant digits (default 6)")
    diff = actions.add_parser("diff", help="‖a − b‖₂ and ‖a‖₂ over every real of two files")
    diff.add_argument("a", metavar="A.psk.d")
    diff.add_argument("b", metavar="B.psk.d")
    _add_text_actions(actions)
    data.set_defaults(handler=main)


def _add_text_actions(actions: argparse._SubParsersAction[Any]) -> None:
    chars = actions.add_parser("chars", help="the sorted distinct characters of a UTF-8 text")
    chars.add_argument("input", metavar="TEXT", help="a UTF-8 text file")
    chars.add_argument("-o", dest="output", required=True, metavar="V.json", help="the output")
    encode = actions.add_parser("encode", help="a UTF-8 text as one token id per character")
    encode.add_argument("input", metavar="TEXT", help="a UTF-8 text file")
    encode.add_argument("--vocab", required=True, metavar="V.json", help="from `data chars`")
    encode.add_argument("-o", dest="output", required=True, metavar="T.txt", help="the output")
    windows = actions.add_parser("lm-windows", help="token ids as next-token windows")
    windows.add_argument("input", metavar="T.txt", help="token ids, from `data encode`")
    windows.add_argument("--vocab", required=True, metavar="N", help="the vocabulary's size")
    windows.add_argument("--seq", required=True, metavar="T", help="the tokens of a window")
    windows.add_argument("-o", dest="output", required=True, metavar="W.psk.d", help="the output")


def main(args: argparse.Namespace) -> int:
    """The body of `presk data`; returns the exit code. It runs under `guard`, as every
    command does: with room for deep recursion, and its failures told in one line."""
    return guard(NAME, lambda: _main(args))


def _main(args: argparse.Namespace) -> int:
    actions = {
        "pack": _pack,
        "info": _info,
        "diff": _diff,
        "chars": _chars,
        "encode": _encode,
        "lm-windows": _lm_windows,
    }
    action = actions.get(getattr(args, "data_command", None) or "")
    if action is None:
        raise UsageError("expected an action: " + ", ".join(actions))
    if getattr(args, "output", None) is not None:  # checked before anything is read
        sources = [getattr(args, name, None) for name in ("input", "vocab")]
        check_out_file("-o", args.output, [s for s in sources if s and s != "-"])
    try:
        return action(args)
    except DataError as error:
        return _fail(error.message)
    except (_Failure, TextError) as error:
        return _fail(str(error))


def _fail(message: str) -> int:
    sys.stderr.write(f"presk data: {message}\n")
    return 1


# -- pack ---------------------------------------------------------------------------------


def _pack(args: argparse.Namespace) -> int:
    try:
        ty = parse_sample_type(args.type)
    except TypeTextError as error:
        raise UsageError(f"--type {error}") from None
    leaves = leaf_layout(ty, args.real)
    kinds = [t for _, t in tensor_types(ty)]
    text = _read_text(args.input)
    columns: list[list[Any]] = [[] for _ in leaves]
    widths = [leaf.elements for leaf in leaves]
    total = sum(widths)
    count = 0
    for number, line in enumerate(text.splitlines(), start=1):
        tokens = line.split()
        if not tokens or tokens[0].startswith("#"):
            continue
        if len(tokens) != total:
            raise _Failure(f"{args.input}:{number}: expected {total} numbers, found {len(tokens)}")
        start = 0
        for column, leaf, ty_leaf, width in zip(columns, leaves, kinds, widths, strict=True):
            for token in tokens[start : start + width]:
                column.append(_number(token, ty_leaf.elem, ty_leaf.bound, leaf, args.input, number))
            start += width
        count += 1
    arrays: list[npt.NDArray[Any]] = []
    for column, leaf in zip(columns, leaves, strict=True):
        shape = (count, *leaf.shape)
        if leaf.dtype == "i64":
            arrays.append(np.array(column, dtype=np.int64).reshape(shape))
        else:
            arrays.append(reals_as(np.array(column, dtype=np.float64).reshape(shape), leaf.dtype))
    data = DataFile(str(ty), count, leaves, arrays)
    write(args.output, data)
    sys.stdout.write(
        f"presk data: wrote {args.output}: {count} samples of {data.type}, "
        f"{data.sample_bytes} bytes each\n"
    )
    return 0


def _read_text(path: str) -> str:
    """The whole input as text; `-` is standard input."""
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as error:
        raise _Failure(f"{path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise _Failure(f"{path}: not UTF-8 text (byte {error.start})") from None


def _number(token: str, elem: Elem, bound: Any, leaf: Leaf, path: str, line: int) -> Any:
    """One token of a line as the element of `leaf`: a float, or an int (idx, bool)."""
    where = f"{path}:{line}: leaf `{leaf.path or '(root)'}`"
    if elem == Elem.REAL:
        if not _REAL.match(token):
            raise _Failure(f"{where}: `{token}` is not a real number")
        return float(token)  # correctly rounded to f64
    if elem == Elem.BOOL:
        value = {"true": 1, "false": 0, "1": 1, "0": 0}.get(token)
        if value is None:
            raise _Failure(f"{where}: `{token}` is not a boolean (true, false, 1, 0)")
        return value
    top = lin_int(bound)
    if not _INT.match(token):
        raise _Failure(f"{where}: `{token}` is not an integer")
    value = int(token)
    if top is None or not 0 <= value < top:
        raise _Failure(f"{where}: {value} is out of range for idx[{top}]")
    return value


# -- info ---------------------------------------------------------------------------------


def _info(args: argparse.Namespace) -> int:
    shown = _natural(args.samples, "--samples", UsageError)
    digits = _natural(args.digits, "--digits", UsageError)
    if digits == 0:
        raise UsageError("--digits 0: expected at least 1")
    data = read(args.file)
    out = [
        f"file     {args.file}",
        f"version  {VERSION}",
        f"type     {data.type}",
        f"count    {data.count}",
        f"sample   {data.sample_bytes} bytes",
        f"leaves   {len(data.leaves)}",
    ]
    width = max((len(leaf.path or "(root)") for leaf in data.leaves), default=0)
    for leaf in data.leaves:
        shape = "[" + ", ".join(str(d) for d in leaf.shape) + "]"
        out.append(f"  {leaf.path or '(root)':<{width}}  {leaf.dtype:<4}  {shape}")
    try:
        types = leaf_types(data)
    except ValueError as error:
        out.append(f"note     the leaves do not match the type: {error}")
        types = {}
    for index in range(min(shown, data.count)):
        leaves = leaf_values(data, index, types)
        if len(leaves) == 1 and not leaves[0][0]:
            out.append(f"sample {index} = {_abbrev(leaves[0][1], digits)}")
            continue
        out.append(f"sample {index}")
        out.extend(f"  {path} = {_abbrev(tensor, digits)}" for path, tensor in leaves)
    if data.count > shown:
        out.append(f"... {data.count - shown} more samples")
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def _natural(text: str, flag: str, error: type[Exception]) -> int:
    if not _INT.match(text) or int(text) < 0:
        raise error(f"{flag} {text}: expected a natural number")
    return int(text)


def _abbrev(t: Tensor, digits: int) -> str:
    """A tensor as `presk run` prints it (`[model: 4] [1.5, 2, ...]`), but with at most
    ITEMS_SHOWN items per bracket: a sample of a large tensor stays one readable line."""

    def element(v: Any) -> str:
        if t.kind is Kind.REAL:
            return format_number(v, digits)
        if t.kind is Kind.BOOL:
            return "true" if v else "false"
        return str(int(v))

    def nest(arr: npt.NDArray[Any]) -> str:
        items = [element(v) if arr.ndim == 1 else nest(v) for v in arr[:ITEMS_SHOWN]]
        if len(arr) > ITEMS_SHOWN:
            items.append("...")
        return "[" + ", ".join(items) + "]"

    if not t.axes:
        return element(t.data[()])
    return format_axes(t.axes) + " " + nest(t.data)


# -- diff ---------------------------------------------------------------------------------


def _diff(args: argparse.Namespace) -> int:
    a, b = read(args.a), read(args.b)
    where = f"{args.a} and {args.b}"
    if a.type != b.type:
        raise _Failure(f"{where} differ in type: `{a.type}` and `{b.type}`")
    if a.count != b.count:
        raise _Failure(f"{where} differ in count: {a.count} and {b.count} samples")
    if len(a.leaves) != len(b.leaves):
        raise _Failure(f"{where} differ in leaves: {len(a.leaves)} and {len(b.leaves)}")
    for x, y in zip(a.leaves, b.leaves, strict=True):
        if (x.path, x.shape, x.dtype == "i64") != (y.path, y.shape, y.dtype == "i64"):
            raise _Failure(f"{where} differ in a leaf: {x.describe()} and {y.describe()}")
    reals_a, reals_b, ints_a, ints_b = [], [], [], []
    for leaf_a, leaf_b, arr_a, arr_b in zip(a.leaves, b.leaves, a.arrays, b.arrays, strict=True):
        if leaf_a.dtype == "i64":
            ints_a.append(arr_a.reshape(-1))
            ints_b.append(arr_b.reshape(-1))
        else:
            reals_a.append(as_f64(arr_a, leaf_a.dtype).reshape(-1))
            reals_b.append(as_f64(arr_b, leaf_b.dtype).reshape(-1))
    va = np.concatenate(reals_a) if reals_a else np.zeros(0)
    vb = np.concatenate(reals_b) if reals_b else np.zeros(0)
    with np.errstate(invalid="ignore", over="ignore"):
        delta = _norm(va - vb)
    size = _norm(va)
    if size == 0:
        relative = 0.0 if delta == 0 else math.inf
    else:
        relative = delta / size
    line = (
        f"presk data: ‖a − b‖₂ = {delta:.6g}, ‖a‖₂ = {size:.6g}, "
        f"relative {relative:.6g} over {va.size} reals"
    )
    if ints_a:
        ia, ib = np.concatenate(ints_a), np.concatenate(ints_b)
        line += f"; {int(np.count_nonzero(ia != ib))} of {ia.size} integers differ"
    sys.stdout.write(line + "\n")
    return 0


def _norm(v: npt.NDArray[np.float64]) -> float:
    """The Euclidean norm, scaled by the largest magnitude so that no square overflows or
    underflows, summed with fsum so that the order of the elements does not matter."""
    if v.size == 0:
        return 0.0
    if not np.all(np.isfinite(v)):
        return float("nan") if np.any(np.isnan(v)) else math.inf
    scale = float(np.max(np.abs(v)))
    if scale == 0:
        return 0.0
    return scale * math.sqrt(math.fsum((v / scale) ** 2))


# -- chars, encode, lm-windows -------------------------------------------------------------


def _chars(args: argparse.Namespace) -> int:
    body = text.read_text(args.input)
    if not body:
        raise _Failure(f"{args.input}: the text is empty: no characters to collect")
    vocab = text.vocabulary(body)
    text.write_vocabulary(args.output, vocab)
    _wrote(args.output, f"{_many(len(vocab), 'character')} over {len(body)} of text")
    return 0


def _encode(args: argparse.Namespace) -> int:
    vocab = text.read_vocabulary(args.vocab)
    ids = text.encode(text.read_text(args.input), vocab, args.input)
    text.write_tokens(args.output, ids)
    _wrote(args.output, f"{_many(ids.size, 'token')} over a vocabulary of {len(vocab)}")
    return 0


def _lm_windows(args: argparse.Namespace) -> int:
    bound = _natural(args.vocab, "--vocab", UsageError)
    seq = _natural(args.seq, "--seq", UsageError)
    for flag, value in (("--vocab", bound), ("--seq", seq)):
        if not 1 <= value < 2**63:
            raise UsageError(f"{flag} {value}: expected a whole number in [1, 2^63)")
    ids = text.read_tokens(args.input, bound)
    inputs, targets = text.windows(ids, seq, args.input)
    type_text = text.write_windows(args.output, bound, inputs, targets)
    _wrote(
        args.output,
        f"{_many(len(inputs), 'window')} of type {type_text} from {_many(ids.size, 'token')}",
    )
    return 0


def _many(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _wrote(path: str, what: str) -> None:
    sys.stdout.write(f"presk data: wrote {path} ({what})\n")
