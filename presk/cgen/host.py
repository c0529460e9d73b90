"""The host IR (presk/host/ir.py) as C: one function per instance, laid out by function.c.j2.

Every statement and pointer is printed here, by one `match` per node kind;
the template only places the lines. Program names reach this text only as
comments (through `names.comment`) and as the hints inside generated names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import assert_never

from presk import names
from presk.cgen.templates import env
from presk.dtypes import Dtype
from presk.host import ir as h

INDENT = "    "


@dataclass(frozen=True)
class PrintOptions:
    """How the host program is printed; the default is the ordinary C text, byte for byte.

    `profile` wraps each launch in two reads of `presk__clock()` (see Note [Profile]);
    `capture` also copies each launch's inputs out, once, where asked (Note [Capture]).
    """

    profile: bool = False
    capture: bool = False


@dataclass(frozen=True)
class ProfiledLaunch:
    """Launch `index` of an instrumented unit: its kernel, its function, the site before it."""

    index: int
    kernel: str
    function: str  # the Presk function's name
    site: str  # the `fn/%N` of the last site comment before it in its body ("" if none)


@dataclass
class Profiler:
    """The launches numbered so far while one unit is printed (its `presk__prof_*` indices)."""

    launches: list[ProfiledLaunch] = field(default_factory=list)
    function: str = ""
    site: str = ""
    # With capture: each kernel's input sizes, as C expressions of bytes.
    inputs: dict[str, tuple[str, ...]] | None = None

    def number(self, kernel: str) -> int:
        i = len(self.launches)
        self.launches.append(ProfiledLaunch(i, kernel, self.function, self.site))
        return i


# Note [Profile]
# ~~~~~~~~~~~~~~
# An instrumented unit (`presk bench --by-kernel`) is the same C text with
# each launch statement between two reads of the monotonic clock; the
# difference is added to `presk__prof_ns[i]` and `presk__prof_calls[i]`
# counted, i the launch's index in print order. Nothing a kernel reads or
# writes changes, so the outputs keep their bits. A split launch is timed
# around its whole parallel region, by the thread that enters it. The
# counters are static: an instrumented entry is timed from one thread.


# Note [Capture]
# ~~~~~~~~~~~~~~
# `autotune` times each nest on the inputs the entry gives it. A capturing
# unit is an instrumented one whose launch i, where `presk__cap[i]` is set,
# first copies its input buffers one after another to that address and clears
# it: the first call of each launch the caller asks for, read at the moment
# the kernel reads them (a frame's buffers are reused later in the call).


def c_type(dtype: str) -> str:
    return Dtype(dtype).c_type


def param(p: h.Param) -> str:
    """A pointer parameter's declaration: inputs are `const`, a key is a `presk_key`."""
    if p.dtype is None:
        return f"const presk_key *{p.name}"
    return f"const {c_type(p.dtype)} *{p.name}"


def index(i: h.Index) -> str:
    match i:
        case int():
            return str(i)
        case h.LoopVar(name, 0):
            return name
        case h.LoopVar(name, plus):
            return f"({name} + {plus})"
        case _:
            assert_never(i)


def ptr(p: h.Ptr) -> str:
    """A pointer expression: a name, or a layer of a stacked buffer."""
    match p:
        case str():
            return p
        case h.Layer(base, at, stride):
            return f"({ptr(base)} + {index(at)} * {stride})"
        case _:
            assert_never(p)


def local(decl: h.Local) -> str:
    match decl:
        case h.Alloc(name, dtype, offset):
            t = c_type(dtype)
            return f"{t} *{name} = ({t} *)(frame + {offset});"
        case h.Accumulators(dtype, first, second, at_first, at_second):
            t = c_type(dtype)
            return f"{t} *{first} = {at_first}; {t} *{second} = {at_second};"
        case _:
            assert_never(decl)


def _args(ptrs: tuple[h.Ptr, ...]) -> str:
    return ", ".join(ptr(p) for p in ptrs)


def _timed(lines: list[str], i: int) -> list[str]:
    """A launch's lines between two clock reads, its time added to counter `i`."""
    return [
        "{",
        "    int64_t presk__t0 = presk__clock();",
        *(INDENT + line if not line.startswith("#") else line for line in lines),
        f"    presk__prof_ns[{i}] += presk__clock() - presk__t0;",
        f"    presk__prof_calls[{i}] += 1;",
        "}",
    ]


def _captured(s: h.Launch, i: int, sizes: tuple[str, ...]) -> list[str]:
    """Launch `i`'s inputs copied to `presk__cap[i]` if set, once (Note [Capture])."""
    lines = [f"if (presk__cap[{i}] != 0) {{", f"    char *presk__d = presk__cap[{i}];"]
    for arg, size in zip(s.args, sizes, strict=False):
        lines.append(f"    memcpy(presk__d, {ptr(arg)}, {size});")
        lines.append(f"    presk__d += {size};")
    lines += [f"    presk__cap[{i}] = 0;", "}"]
    return lines


def _launch(s: h.Launch) -> list[str]:
    if s.split is None:
        return [f"{s.kernel}({_args(s.args)});"]
    # Each worker takes a contiguous part of the split loop; without OpenMP, all of it.
    n, args = s.split, _args(s.args)
    team = "threads" if s.workers is None else f"({s.workers} < threads ? {s.workers} : threads)"
    return [
        "#ifdef _OPENMP",
        f"#pragma omp parallel num_threads({team})",
        "{",
        "    int64_t presk_w = omp_get_num_threads(), presk_t = omp_get_thread_num();",
        f"    {s.kernel}({args}, {n} * presk_t / presk_w, {n} * (presk_t + 1) / presk_w);",
        "}",
        "#else",
        f"{s.kernel}({args}, 0, {n});",
        "#endif",
    ]


def _loop_head(s: h.Fold) -> str:
    v, n = s.var, s.layers
    match s.order:
        case h.Order.FORWARD:
            return f"for (int64_t {v} = 0; {v} < {n}; {v}++) {{"
        case h.Order.ALL_BUT_LAST:
            return f"for (int64_t {v} = 0; {v} + 1 < {n}; {v}++) {{"
        case h.Order.BACKWARD:
            return f"for (int64_t {v} = {n} - 1; {v} >= 0; {v}--) {{"
        case _:
            assert_never(s.order)


def stmt(s: h.Stmt, profiler: Profiler | None = None) -> list[str]:
    """The C lines of one statement, unindented; with a profiler, each launch timed."""
    match s:
        case h.Site(where, name):
            if profiler is not None:
                profiler.site = where
            site = where + (f" ({name})" if name else "")
            return [f"/* {names.comment(site)} */"]
        case h.Launch():
            if profiler is None:
                return _launch(s)
            i = profiler.number(s.kernel)
            copy = [] if profiler.inputs is None else _captured(s, i, profiler.inputs[s.kernel])
            return [*copy, *_timed(_launch(s), i)]
        case h.Call(callee, frame, args):
            parts = [f"frame + {frame}", "threads", *(ptr(a) for a in args)]
            return [f"{callee}({', '.join(parts)});"]
        case h.Copy(dst, src, size):
            return [f"memcpy({ptr(dst)}, {ptr(src)}, {size});"]
        case h.Swap(dtype, first, second):
            t = c_type(dtype)
            return [f"{{ {t} *swap = {first}; {first} = {second}; {second} = swap; }}"]
        case h.Fold(_, _, _, body):
            inner = [INDENT + line for b in body for line in stmt(b, profiler)]
            return [_loop_head(s), *inner, "}"]
        case _:
            assert_never(s)


def function_c(fn: h.Function, profiler: Profiler | None = None) -> str:
    """One function instance as a `static` C function under its source's name.

    With a profiler (an instrumented unit), its launches are timed and numbered there.
    """
    if profiler is not None:
        profiler.function, profiler.site = fn.source, ""
    params = ["char *frame", "int threads"]
    params += [param(p) for p in fn.params]
    params += [f"{c_type(p.dtype)} *{p.name}" for p in fn.outputs if p.dtype is not None]
    # Every parameter is marked used: a function need not read all its inputs
    # (a gradient may ignore a value), and -Wextra would warn.
    unused = ["frame", "threads", *(p.name for p in fn.params), *(p.name for p in fn.outputs)]
    return (
        env()
        .get_template("function.c.j2")
        .render(
            source=names.comment(fn.source, newlines=True),
            name=fn.c_name,
            params=", ".join(params),
            unused=unused,
            locals=[local(d) for d in fn.locals],
            body=[line for s in fn.body for line in stmt(s, profiler)],
        )
    )
