"""Conformance: the native backend against the reference interpreter at 256 bits.

For every case — each function of conformance/programs/*.psk, and each example entry
listed in `EXAMPLES` — and each realization f64, f32 and bf16, this runner

1. synthesizes the entry's inputs exactly as `presk run` does (same front end, same
   `--dim` binding, same seed, same paths, same parameter initialisers: the steps of
   `presk.interp.run.reference_inputs`);
2. evaluates the reference interpreter at 256 bits once;
3. compiles the entry natively in the realization (`presk.pipeline.compile_entry`, what
   `presk run --backend native --realize R` calls) and calls it on those same inputs;
4. checks every real output element: |x − x̂| ≤ ε · (|x| + a), with (ε, a) from `BANDS`.
   Integer outputs (argmax, sample, positions, …) must be equal, except where the
   reference's decision is within rounding of a tie (`_explain_mismatch`);
5. triages every element out of its band (`triage`): how large a gap the element's
   conditioning alone explains, from the reference evaluated in a model of the
   realization (53 or 24 bits per operation; bf16 as f32 arithmetic with every stored
   value rounded to 8 bits) on the rounded inputs, and from the amplification κ the
   element shows at 53 bits. A failure no more than twice that is marked
   `ill-conditioned`; `--excuse-conditioning` counts such an entry as passed.

It prints the worst relative gap max |x − x̂| / (|x| + a) of each entry and realization,
a list of every failure, and `N passed, M failed` (one count per entry and realization);
the exit status is 1 on any failure.

    python -m conformance.run                  # everything
    python -m conformance.run -k softmax -r f32
    python -m conformance.run --list
    python -m conformance.run --coverage      # the primitives the programs reach

Programs say which dimensions their functions need with a comment line
`-- @dims NAME=V …` before the `fn` (or `-- @file-dims NAME=V …` for every function of
the file); other functions run with none.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import re
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `python conformance/run.py` puts conformance/ first instead
    sys.path.insert(0, str(REPO))

import gmpy2  # noqa: E402
import numpy as np  # noqa: E402

PROGRAMS = REPO / "conformance" / "programs"
REALIZATIONS = ("f64", "f32", "bf16")
BITS = 256
SEED = 0

# (ε, a) of |x − x̂| ≤ ε · (|x| + a), per realization.
BANDS: dict[str, tuple[float, float]] = {
    "f64": (2.0**-40, 2.0**-50),
    "f32": (2.0**-15, 2.0**-20),
    "bf16": (2.0**-4, 2.0**-5),
}

_MINIGPT_CONSTS = (("V", "64"), ("D", "16"), ("H", "2"), ("L", "2"))


@dataclass(frozen=True)
class Case:
    """One entry of one file, as `presk run FILE --entry ENTRY --dim … --const …` names it."""

    label: str
    file: str  # relative to the repository root
    entry: str
    dims: tuple[tuple[str, str], ...] = ()
    consts: tuple[tuple[str, str], ...] = ()
    seed: int = SEED

    def command(self, realize: str | None = None) -> str:
        """The `presk run` command line of this case."""
        parts = ["presk run", self.file, "--entry", repr(self.entry)]
        parts += [f"--dim {k}={v}" for k, v in self.dims]
        parts += [f"--const {k}={v}" for k, v in self.consts]
        if self.seed != SEED:
            parts.append(f"--seed {self.seed}")
        if realize is not None:
            parts += ["--backend native", f"--realize {realize}"]
        return " ".join(parts)


EXAMPLES: tuple[Case, ...] = (
    Case("mse", "tests/examples/mlp/mlp.psk", "mse", (("D", "4"), ("B", "3"))),
    Case("mse_grad", "tests/examples/mlp/mlp.psk", "mse_grad", (("D", "4"), ("B", "3"))),
    Case("RMSNorm{8}.apply", "tutorial/02_norm.psk", "RMSNorm{8}.apply", (("batch", "3"),)),
    Case(
        "LayerNorm{8}.apply",
        "tests/examples/minigpt/minigpt.psk",
        "LayerNorm{8}.apply",
        (("batch", "3"),),
    ),
    Case(
        "MiniGPT.apply (tiny)",
        "tests/examples/minigpt/minigpt.psk",
        "MiniGPT.apply",
        (("B", "2"), ("T", "8")),
        _MINIGPT_CONSTS,
    ),
    Case(
        "training loss (tiny MiniGPT)",
        "tests/examples/minigpt/train_minigpt.psk",
        "loss",
        (("B", "2"), ("T", "8")),
        _MINIGPT_CONSTS,
    ),
    Case("loss_grad (stacked tower)", "tests/ad/tower_grad.psk", "loss_grad", (("B", "2"),)),
    Case("attend (tutorial 03)", "tutorial/03_attention.psk", "attend", (("B", "1"), ("T", "3"))),
    Case("loss (tutorial 04)", "tutorial/04_grad.psk", "loss", (("D", "3"), ("B", "2"))),
    Case("loss_grad (tutorial 04)", "tutorial/04_grad.psk", "loss_grad", (("D", "3"), ("B", "2"))),
)


# ---------------------------------------------------------------- the cases of the programs

_DIMS_LINE = re.compile(r"^\s*--\s*@(file-)?dims\b(.*)$")
_FN_LINE = re.compile(r"^fn\s+([\w']+)")


def _bindings(text: str) -> tuple[tuple[str, str], ...]:
    out = []
    for item in text.split():
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"`@dims` expects NAME=VALUE, found {item!r}")
        out.append((name, value))
    return tuple(out)


def program_cases(directory: Path = PROGRAMS) -> list[Case]:
    """Every file-level function of every program, with its `@dims`."""
    cases: list[Case] = []
    for path in sorted(directory.glob("*.psk")):
        file_dims: tuple[tuple[str, str], ...] = ()
        pending: tuple[tuple[str, str], ...] | None = None
        for line in path.read_text(encoding="utf-8").splitlines():
            m = _DIMS_LINE.match(line)
            if m:
                if m.group(1):
                    file_dims = _bindings(m.group(2))
                else:
                    pending = _bindings(m.group(2))
                continue
            fm = _FN_LINE.match(line)
            if fm:
                dims = pending if pending is not None else file_dims
                rel = path.relative_to(REPO).as_posix()
                cases.append(Case(f"{path.stem}.{fm.group(1)}", rel, fm.group(1), dims))
                pending = None
    return cases


def all_cases() -> list[Case]:
    return program_cases() + list(EXAMPLES)


# ---------------------------------------------------------------- evaluation, as `presk run`


@functools.cache
def _front(file: str, consts: tuple[tuple[str, str], ...]) -> tuple[Any, Any]:
    """The checked program and its differentiated Core module (one per file and consts)."""
    from presk.commands.common import const_overrides
    from presk.pipeline import core_module, front_end

    checked, _ = front_end(str(REPO / file), const_overrides([f"{k}={v}" for k, v in consts]))
    return checked, core_module(checked, "store")


@dataclass
class Loaded:
    """An entry with its dimensions and synthesized inputs, ready for either backend."""

    case: Case
    name: str  # the Core function
    text: str  # the entry as given to --entry
    dims: dict[str, int]
    module: Any
    inputs: list[tuple[str, Any, Any]]  # (name, type, value), as `presk run` draws them
    init_hook: Any
    checked: Any
    entry: Any  # presk.entries.Entry
    binding: Any  # presk.entries.Binding


def load(case: Case, bits: int = BITS) -> Loaded:
    """Bind the dimensions and synthesize the inputs of `case` as `presk run` does."""
    from presk.entries import bind_dims, find_entry
    from presk.interp.run import reference_inputs, reference_interpreter

    checked, module = _front(case.file, case.consts)
    entry = find_entry(checked, case.entry)
    binding = bind_dims(entry, dict(case.dims))
    dims = binding.dims
    init_hook = reference_interpreter(module).init_hook
    with gmpy2.context(precision=bits):
        values = reference_inputs(entry.info, dims, binding.prefix, case.seed)
    inputs = [(n, t, v) for (n, t, _), v in zip(entry.info.params, values, strict=True)]
    return Loaded(
        case, entry.info.name, entry.text, dims, module, inputs, init_hook, checked, entry, binding
    )


@dataclass
class Record:
    """An argmax or sample the reference evaluated: what a tie analysis needs."""

    name: str
    operand: Any  # Tensor: the values (argmax) or the logits (sample)
    axis: int
    result: Any  # Tensor of indices
    uniforms: list[float] | None = None


def reference(
    loaded: Loaded, bits: int = BITS, store_bits: int | None = None
) -> tuple[Any, list[Record]]:
    """The reference result at `bits`, and every argmax and sample it evaluated.

    With `store_bits`, every real value an instruction produces is rounded to that many
    significant bits before it is used (a model of bf16 storage: f32 arithmetic inside a
    kernel, bf16 between them).
    """
    from presk.interp import rng
    from presk.interp.reference import Interpreter
    from presk.interp.tensor import Tensor

    records: list[Record] = []

    class Recording(Interpreter):
        def prim(self, op: Any, values: list[Any], dims: dict[str, int], instr: Any) -> Any:
            out = super().prim(op, values, dims, instr)
            if op.name == "argmax":
                x = values[0]
                axis = op.attr("axis")
                i = [a.name for a in x.axes].index(axis) if isinstance(axis, str) else x.rank - 1
                records.append(Record("argmax", x, i, out))
            elif op.name == "sample":
                key, logits = values[0], values[1]
                assert isinstance(logits, Tensor)
                rows = logits.size // logits.shape[-1] if logits.shape[-1] else 0
                records.append(
                    Record("sample", logits, logits.rank - 1, out, rng.uniforms(key, rows))
                )
            return out

        def step(self, fn: Any, instr: Any, env: Any, dims: dict[str, int]) -> Any:
            out = super().step(fn, instr, env, dims)
            return out if store_bits is None else _round_reals(out, store_bits)

    interp = Recording(loaded.module)
    interp.init_hook = loaded.init_hook
    with gmpy2.context(precision=bits):
        value = interp.call(loaded.name, loaded.dims, [v for _, _, v in loaded.inputs])
    return value, records


def _round_reals(value: Any, bits: int) -> Any:
    """Every real element of a value rounded to `bits` significant bits (nearest, even)."""
    from presk.interp.reference import Tree
    from presk.interp.tensor import Kind, Tensor

    if isinstance(value, Tensor) and value.kind == Kind.REAL:
        return value.map(lambda x: gmpy2.mpfr(x, bits))
    if isinstance(value, Tree):
        return Tree(tuple((k, _round_reals(v, bits)) for k, v in value.items))
    if isinstance(value, tuple):
        return tuple(_round_reals(v, bits) for v in value)
    return value


def native(loaded: Loaded, realize: str, bits: int = BITS, threads: int | None = None) -> Any:
    """The native result in `realize`, as `presk run --backend native --realize` computes it
    (on `threads` threads; by default presk run's, `PRESK_THREADS` or the machine's cores)."""
    from presk.commands.common import threads_of
    from presk.host.realization import parse
    from presk.pipeline import compile_entry

    count = threads_of(None) if threads is None else threads
    compiled = compile_entry(
        loaded.checked, loaded.entry, loaded.binding, parse(realize), count
    )
    with gmpy2.context(precision=bits):
        return compiled.call_reference([v for _, _, v in loaded.inputs])


def rounded_inputs(loaded: Loaded, realize: str) -> Loaded:
    """`loaded` with every real input replaced by the value the native buffers hold."""
    from presk.backends.native import from_bf16, to_bf16
    from presk.interp.reference import Tree
    from presk.interp.tensor import Kind, Tensor

    def round_value(v: Any) -> Any:
        if isinstance(v, Tensor) and v.kind == Kind.REAL:
            doubles = np.array([float(x) for x in v.data.reshape(-1)], dtype=np.float64)
            if realize == "f32":
                doubles = doubles.astype(np.float32).astype(np.float64)
            elif realize == "bf16":
                doubles = from_bf16(to_bf16(doubles.astype(np.float32))).astype(np.float64)
            data = np.empty(v.data.shape, dtype=object)
            for idx, x in zip(np.ndindex(v.data.shape), doubles, strict=True):
                data[idx] = gmpy2.mpfr(float(x), 64)
            return Tensor(Kind.REAL, v.axes, data)
        if isinstance(v, Tree):
            return Tree(tuple((k, round_value(x)) for k, x in v.items))
        if isinstance(v, tuple):
            return tuple(round_value(x) for x in v)
        return v

    inputs = [(n, t, round_value(v)) for n, t, v in loaded.inputs]
    return dataclasses.replace(loaded, inputs=inputs)


# ---------------------------------------------------------------- comparison


def flatten(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """The tensor leaves of a result with their paths (`w1`, `blocks.norm.γ`, `0`)."""
    from presk.interp.reference import Tree
    from presk.interp.tensor import Tensor

    if isinstance(value, Tensor):
        return [(path or "out", value)]
    if isinstance(value, Fraction):  # a literal result: the reference keeps it exact
        from presk.interp.prims import real

        return [(path or "out", real(value))]
    if isinstance(value, Tree):
        return [leaf for k, v in value.items for leaf in flatten(v, f"{path}.{k}" if path else k)]
    if isinstance(value, tuple):
        return [
            leaf
            for i, v in enumerate(value)
            for leaf in flatten(v, f"{path}.{i}" if path else str(i))
        ]
    raise TypeError(f"cannot compare a result of type {type(value).__name__}")


def relative_gap(x: Any, y: Any, a: float) -> float:
    """|x − y| / (|x| + a), exactly enough (256 bits) and as a float; inf for a NaN."""
    with gmpy2.context(precision=BITS):
        x, y = gmpy2.mpfr(x), gmpy2.mpfr(y)
        if gmpy2.is_nan(x) or gmpy2.is_nan(y):
            return float("inf")
        if x == y:
            return 0.0
        if gmpy2.is_infinite(x) or gmpy2.is_infinite(y):
            return float("inf")
        return float(abs(x - y) / (abs(x) + a))


def _within(x: Any, y: Any, eps: float, a: float) -> bool:
    """|x − y| ≤ ε(|x| + a) + ε(|y| + a): both sides may move within their band."""
    with gmpy2.context(precision=BITS):
        x, y = gmpy2.mpfr(x), gmpy2.mpfr(y)
        return bool(abs(x - y) <= eps * (abs(x) + a) + eps * (abs(y) + a))


def _row(tensor: Any, axis: int, r: int) -> list[Any]:
    data = np.moveaxis(tensor.data, axis, -1)
    return list(data.reshape(-1, tensor.shape[axis])[r])


def _explain_mismatch(
    records: list[Record], ref: Any, r: int, want: int, got: int, eps: float, a: float
) -> str | None:
    """Why native index `got` instead of the reference's `want` at flat position r is a tie
    within rounding, or None when it cannot be shown.

    argmax: the two values are within their bands of each other. sample: with u the
    row's uniform and c_k the reference's running sums of the softmax, every c_k the
    choice moved across (k in [want, got) upwards, k = got downwards) lies within its band
    of u, so the realization's rounded sums may fall on the other side of u.
    """
    for rec in records:
        if rec.result.shape != ref.shape or rec.result.flat() != ref.flat():
            continue
        row = _row(rec.operand, rec.axis, r)
        if rec.name == "argmax":
            if _within(row[want], row[got], eps, a):
                return (
                    f"argmax tie: values {float(row[want]):.9g} (reference's choice {want}) "
                    f"and {float(row[got]):.9g} (native's {got}) are within the band"
                )
            continue
        assert rec.uniforms is not None
        u = rec.uniforms[r]
        with gmpy2.context(precision=BITS):
            m = max(row)
            e = [gmpy2.exp(x - m) for x in row]
            s = gmpy2.mpfr(0)
            for x in e:
                s += x
            sums, c = [], None
            for x in e:
                p = x / s
                c = p if c is None else c + p
                sums.append(c)
            crossed = range(want, got) if got > want else [got]
            if all(_within(u, sums[k], eps, a) for k in crossed):
                return (
                    f"sample tie: u = {u!r} lies within the band of the running sum(s) "
                    + ", ".join(f"c{k} = {float(sums[k]):.9g}" for k in crossed)
                )
    return None


@dataclass
class Bad:
    """An output element outside its band (or an index that differs and is not a tie)."""

    path: str  # the leaf and the element: `blocks.proj.w[0, 3, 1]`
    leaf: int  # position of the leaf in `flatten`
    flat: int  # row-major position in the leaf
    reference: Any
    native: Any
    gap: float | None  # None for an index
    precise_gap: float | None = None  # the gap conditioning alone explains (see `triage`)
    kappa: float | None = None  # the amplification one rounding per operation shows

    def text(self, eps: float) -> str:
        if self.gap is None:
            return f"{self.path}: reference {self.reference}, native {self.native} (not a tie)"
        line = (
            f"{self.path}: reference {float(self.reference):.17g}, "
            f"native {float(self.native):.17g} (gap {self.gap:.2e} > {eps:.2e})"
        )
        if self.precise_gap is not None:
            line += f"; conditioning explains {self.precise_gap:.2e} (κ ≈ {self.kappa:.0f})"
            if self.conditioned:
                line += ": ill-conditioned"
        return line

    @property
    def conditioned(self) -> bool:
        """The gap is no more than twice what the element's conditioning explains."""
        return (
            self.gap is not None
            and self.precise_gap is not None
            and self.gap <= 2 * self.precise_gap
        )


@dataclass
class Outcome:
    """One entry in one realization."""

    gap: float | None = None  # worst |x − x̂| / (|x| + a) over real outputs; None: none
    bad: list[Bad] = field(default_factory=list)
    structure: str | None = None  # the result's structure differs
    notes: list[str] = field(default_factory=list)  # ties allowed
    seconds: float = 0.0
    error: str | None = None  # the native backend could not run it
    excused: bool = False  # every bad element ill-conditioned, and --excuse-conditioning

    @property
    def passed(self) -> bool:
        return self.error is None and self.structure is None and (not self.bad or self.excused)

    def failure_lines(self, realize: str, limit: int = 5) -> list[str]:
        if self.error is not None:
            return [self.error]
        if self.structure is not None:
            return [self.structure]
        eps = BANDS[realize][0]
        lines = [b.text(eps) for b in self.bad[:limit]]
        if len(self.bad) > limit:
            lines.append(f"… {len(self.bad) - limit} more")
        return lines


# The triage's model of each realization: (arithmetic bits, storage bits); bf16 is f32
# arithmetic with every stored value rounded to 8 significant bits.
PRECISION: dict[str, tuple[int, int | None]] = {
    "f64": (53, None),
    "f32": (24, None),
    "bf16": (24, 8),
}


def compare(ref: Any, got: Any, realize: str, records: list[Record]) -> Outcome:
    """Every output element of `got` against the reference `ref` in the band of `realize`."""
    from presk.interp.tensor import Kind

    eps, a = BANDS[realize]
    out = Outcome()
    ref_leaves, got_leaves = flatten(ref), flatten(got)
    ref_paths, got_paths = [p for p, _ in ref_leaves], [p for p, _ in got_leaves]
    if ref_paths != got_paths:
        out.structure = f"result structure differs: {ref_paths} vs {got_paths}"
        return out
    for leaf, ((path, x), (_, y)) in enumerate(zip(ref_leaves, got_leaves, strict=True)):
        if x.shape != y.shape or x.kind != y.kind:
            out.structure = f"{path}: {x.kind.name}{x.shape} vs {y.kind.name}{y.shape}"
            return out
        for r, (xv, yv) in enumerate(zip(x.flat(), y.flat(), strict=True)):
            at = f"{path}[{', '.join(map(str, np.unravel_index(r, x.shape)))}]" if x.shape else path
            if x.kind == Kind.REAL:
                gap = relative_gap(xv, yv, a)
                out.gap = gap if out.gap is None else max(out.gap, gap)
                if not gap <= eps:
                    out.bad.append(Bad(at, leaf, r, xv, yv, gap))
            elif xv != yv:
                why = None
                if x.kind == Kind.IDX:
                    why = _explain_mismatch(records, x, r, int(xv), int(yv), eps, a)
                if why is None:
                    out.bad.append(Bad(at, leaf, r, xv, yv, None))
                else:
                    out.notes.append(f"{at}: reference {xv}, native {yv}: {why}")
    return out


# Unit roundoffs: the relative error of one rounding to the realization's format.
UNIT_ROUNDOFF = {"f64": 2.0**-53, "f32": 2.0**-24, "bf16": 2.0**-9}


def triage(loaded: Loaded, ref: Any, realize: str, outcome: Outcome) -> None:
    """Give each bad real element an estimate of the gap its conditioning alone explains.

    Two estimates, the larger kept: (1) the gap of the reference evaluated in a model of
    the realization (`PRECISION`: 53 or 24 bits per operation, and for bf16 every value an
    instruction produces rounded to 8 bits) on the inputs rounded to the realization;
    (2) κ · u, with κ = gap(reference at 53 bits) / 2⁻⁵³ the amplification the element
    showed for one rounding per operation in f64, and u the realization's unit roundoff.
    A native gap no larger than twice that is the problem's, not the backend's.
    """
    if not any(b.gap is not None for b in outcome.bad):
        return
    _, a = BANDS[realize]
    inputs = rounded_inputs(loaded, realize) if realize != "f64" else loaded
    bits, store = PRECISION[realize]
    at_p = [t for _, t in flatten(reference(inputs, bits, store)[0])]
    at_53 = at_p if realize == "f64" else [t for _, t in flatten(reference(loaded, 53)[0])]
    for b in outcome.bad:
        if b.gap is None or b.gap == float("inf"):
            continue
        gap_p = relative_gap(b.reference, at_p[b.leaf].flat()[b.flat], a)
        kappa = relative_gap(b.reference, at_53[b.leaf].flat()[b.flat], a) / 2.0**-53
        b.kappa = kappa
        b.precise_gap = max(gap_p, kappa * UNIT_ROUNDOFF[realize])


# ---------------------------------------------------------------- coverage

# What the programs must make the native backend run: every primitive of the checker's
# table, the arithmetic operators, the adjoint primitives of differentiation, and folds.
ADJOINTS = frozenset(
    {
        "sum_to",
        "reduce_vjp",
        "dot_vjp_l",
        "dot_vjp_r",
        "ein_vjp_l",
        "ein_vjp_r",
        "softmax_vjp",
        "log_softmax_vjp",
        "cross_entropy_vjp",
        "embed_vjp",
        "shape_vjp",
        "zeros_like",
        "set_field",
        "tree_add",
        "erf_vjp",
        "gelu_vjp",
        "heaviside",
        "sign",
        "ylog",
    }
)
OPERATORS = frozenset({"add", "sub", "mul", "div", "pow", "neg", "dot", "ein", "dim"})
CONSTRUCTS = frozenset({"fold", "fold reverse"})


def required() -> frozenset[str]:
    from presk.types.prims import RULES

    return frozenset(RULES) | OPERATORS | ADJOINTS | CONSTRUCTS


def reached(case: Case) -> set[str]:
    """The Core primitives (and `fold`, `fold reverse`) an entry evaluates, through calls."""
    from presk.core import ir

    checked, module = _front(case.file, case.consts)
    from presk.entries import find_entry

    functions = {f.name: f for f in module.functions}
    seen: set[str] = set()
    out: set[str] = set()
    todo = [find_entry(checked, case.entry).info.name]
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        for instr in functions[name].body:
            op = instr.op
            if isinstance(op, ir.Prim):
                out.add(op.name)
            elif isinstance(op, ir.Call):
                todo.append(op.fn)
            elif isinstance(op, (ir.Fold, ir.FoldFwd)):
                out.add("fold")
                todo.append(op.fn)
            elif isinstance(op, (ir.FoldVjp, ir.FoldBwd)):
                out.add("fold reverse")
                todo.extend((op.fn, op.forward) if isinstance(op, ir.FoldVjp) else (op.fn,))
    return out


def coverage(cases: Sequence[Case]) -> dict[str, list[str]]:
    """Each primitive reached by `cases`, with the labels of the cases that reach it."""
    table: dict[str, list[str]] = {}
    for case in cases:
        for name in reached(case):
            table.setdefault(name, []).append(case.label)
    return table


# ---------------------------------------------------------------- running


@dataclass
class CaseResult:
    case: Case
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    error: str | None = None  # the reference itself could not run it
    reference_seconds: float = 0.0


def run_case(
    case: Case,
    realizations: Sequence[str],
    rounded: bool = False,
    excuse: bool = False,
    threads: int | None = None,
) -> CaseResult:
    """The reference once, then every realization natively, compared (failures triaged)."""
    result = CaseResult(case)
    try:
        loaded = load(case)
        start = time.perf_counter()
        ref, records = reference(loaded)
        result.reference_seconds = time.perf_counter() - start
    except Exception as error:
        result.error = f"reference: {type(error).__name__}: {_message(error)}"
        return result
    for realize in realizations:
        start = time.perf_counter()
        try:
            got = native(loaded, realize, threads=threads)
        except Exception as error:
            outcome = Outcome(error=f"{type(error).__name__}: {_message(error)}")
        else:
            expected, recs = ref, records
            if rounded and realize != "f64":
                expected, recs = reference(rounded_inputs(loaded, realize))
            try:
                outcome = compare(expected, got, realize, recs)
                if outcome.bad:
                    triage(loaded, expected, realize, outcome)
                    outcome.excused = excuse and all(b.conditioned for b in outcome.bad)
            except Exception as error:
                outcome = Outcome(error=f"compare: {type(error).__name__}: {_message(error)}")
        outcome.seconds = time.perf_counter() - start
        result.outcomes[realize] = outcome
    return result


def _message(error: BaseException) -> str:
    text = getattr(error, "message", None) or str(error)
    site = getattr(error, "site", None)
    return f"{text} (at {site})" if site else text


def _run_one(args: tuple[Case, tuple[str, ...], bool, bool, int | None]) -> CaseResult:
    return run_case(*args)


def run_all(
    cases: Sequence[Case],
    realizations: Sequence[str],
    jobs: int,
    rounded: bool = False,
    excuse: bool = False,
    threads: int | None = None,
) -> Iterable[CaseResult]:
    """Results in the order of `cases`, computed by `jobs` processes."""
    work = [(c, tuple(realizations), rounded, excuse, threads) for c in cases]
    if jobs <= 1:
        yield from map(_run_one, work)
        return
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(_run_one, work)


def gap_text(outcome: Outcome | None) -> str:
    if outcome is None:
        return "-"
    if outcome.error is not None:
        return "error"
    text = "exact" if outcome.gap is None else ("0" if outcome.gap == 0 else f"{outcome.gap:.1e}")
    if outcome.excused:
        text += " c"
    elif not outcome.passed:
        text += " !"
    elif outcome.notes:
        text += " t"
    return text


def table_line(label: str, cells: Sequence[str], width: int = 30) -> str:
    return f"{label:<{width}} " + " ".join(f"{c:<9}" for c in cells).rstrip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conformance.run",
        description="Compare the native backend with the reference interpreter at 256 bits.",
    )
    parser.add_argument("-k", dest="filter", help="only cases whose label contains this text")
    parser.add_argument(
        "-r",
        "--realize",
        action="append",
        choices=REALIZATIONS,
        help="a realization to run (repeatable; default all three)",
    )
    parser.add_argument(
        "-j", "--jobs", type=int, default=os.cpu_count() or 1, help="worker processes"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads of each native call (default: presk run's, PRESK_THREADS or the cores)",
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="synthesize every case's inputs from this seed"
    )
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument(
        "--coverage",
        action="store_true",
        help="list the primitives the cases reach (and the required ones they miss) and exit",
    )
    parser.add_argument(
        "--programs-only", action="store_true", help="only the programs, not the examples"
    )
    parser.add_argument(
        "--examples-only", action="store_true", help="only the examples, not the programs"
    )
    parser.add_argument(
        "--rounded-inputs",
        action="store_true",
        help="compare f32 and bf16 with the reference evaluated on the inputs rounded to the "
        "realization (separates the arithmetic's error from the inputs' rounding)",
    )
    parser.add_argument(
        "--excuse-conditioning",
        action="store_true",
        help="count as passed an entry whose every out-of-band element is ill-conditioned: "
        "its gap is at most twice what its conditioning explains (see `triage`)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print timings and ties")
    args = parser.parse_args(argv)

    cases = (
        program_cases()
        if args.programs_only
        else list(EXAMPLES)
        if args.examples_only
        else all_cases()
    )
    if args.filter:
        cases = [c for c in cases if args.filter in c.label]
    if args.seed is not None:
        cases = [dataclasses.replace(c, seed=args.seed) for c in cases]
    if args.list:
        for c in cases:
            print(f"{c.label:<40} {c.command()}")
        return 0
    if args.coverage:
        table = coverage(cases)
        for name in sorted(table):
            users = table[name]
            print(f"{name:<20} {len(users):>4}  {users[0]}" + (" …" if len(users) > 1 else ""))
        missing = sorted(required() - set(table))
        print(f"missing: {', '.join(missing) if missing else 'none'}")
        return 1 if missing else 0
    realizations = tuple(args.realize or REALIZATIONS)

    start = time.perf_counter()
    width = max([30, *(len(c.label) for c in cases)])
    print(table_line("Entry", realizations, width))
    sys.stdout.flush()
    results: list[CaseResult] = []
    for result in run_all(
        cases,
        realizations,
        args.jobs,
        args.rounded_inputs,
        args.excuse_conditioning,
        args.threads,
    ):
        results.append(result)
        if result.error is not None:
            cells = ["error"] * len(realizations)
        else:
            cells = [gap_text(result.outcomes.get(r)) for r in realizations]
        line = table_line(result.case.label, cells, width)
        if args.verbose:
            times = " ".join(f"{result.outcomes[r].seconds:.1f}" for r in result.outcomes)
            line += f"   [ref {result.reference_seconds:.1f}s; native {times}s]"
        print(line)
        sys.stdout.flush()

    passed = failed = 0
    report: list[str] = []
    ties: list[str] = []
    excused: list[str] = []
    for result in results:
        if result.error is not None:
            failed += len(realizations)
            report.append(f"{result.case.label} (all): {result.error}\n    {result.case.command()}")
            continue
        for realize in realizations:
            outcome = result.outcomes[realize]
            if outcome.passed:
                passed += 1
            else:
                failed += 1
                lines = outcome.failure_lines(realize)
                report.append(
                    f"{result.case.label} ({realize}): "
                    + "\n    ".join([*lines, result.case.command(realize)])
                )
            if outcome.excused:
                excused.append(
                    f"{result.case.label} ({realize}): "
                    + "\n    ".join(outcome.failure_lines(realize))
                )
            ties.extend(f"{result.case.label} ({realize}) {n}" for n in outcome.notes)
    if report:
        print("\nFailures:")
        for item in report:
            print("  " + item)
    if excused:
        print("\nIll-conditioned, counted as passed (--excuse-conditioning):")
        for item in excused:
            print("  " + item)
    if ties and args.verbose:
        print("\nTies within rounding (allowed):")
        for item in ties:
            print("  " + item)
    elapsed = time.perf_counter() - start
    print(
        "\n(gap: max |x − x̂| / (|x| + a) over the real outputs; ! a failure, "
        "t a tie within rounding, c ill-conditioned and excused)"
    )
    print(f"{len(results)} entries in {elapsed:.0f} s")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
