"""The host program as one C translation unit, laid out by templates/c/.

The printer computes every piece of text (kernels, functions, the entry and
its interface); the templates only place them. The interface — the arena,
the key, the entry's input and output structs and its prototype — is one
string used both in the C text and as the cffi declaration, so the two
cannot disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from presk import __version__, names, resources
from presk.cgen.c_printer import kernel_c
from presk.cgen.host import PrintOptions, ProfiledLaunch, Profiler, function_c
from presk.cgen.templates import env
from presk.dtypes import Dtype
from presk.host.program import HKey, HostProgram, HTensor
from presk.kernel import ir as kir

# The export's modules lay their files out with the same environment.
_env = env


def c_name(text: str) -> str:
    """A leaf path or name in C identifier characters (see `presk.names.c_name`)."""
    return names.c_name(text)


def _strip_local_includes(text: str) -> str:
    return re.sub(r'^#include "[^"]+"\n', "", text, flags=re.MULTILINE)


# The runtime's key, declared for cffi (presk_rng.h defines it for C).
KEY_CDEF = "typedef struct { uint32_t k[2]; } presk_key;"


@cache
def runtime_text() -> str:
    """The runtime and the libm, pasted into every unit: the libm as the unit's private
    copy, whose lane forms its kernels take inline (presk_libm.h)."""
    parts = [
        resources.read("runtime/c/presk_rt.h"),
        resources.read("runtime/c/presk_rng.h"),
        _strip_local_includes(resources.read("runtime/c/presk_rng.c")),
        "#define PRESK_LIBM_PRIVATE",
        resources.read("libm/musl/presk_libm.h"),
        _strip_local_includes(resources.read("libm/musl/presk_libm.c")),
    ]
    return "\n".join(parts)


@dataclass(frozen=True)
class Unit:
    """A printed program: its C text, the cffi declaration, the entry's symbol."""

    text: str
    cdef: str
    symbol: str
    inputs: list[tuple[str, str, HTensor | HKey]]  # (field, C type, leaf)
    outputs: list[tuple[str, str, HTensor]]
    arena_bytes: int
    # The pieces of `text`, which the C export writes to separate files.
    banner: str = ""
    kernels: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()
    interface: str = ""
    entry: str = ""
    # An instrumented unit's launches, by counter index (PrintOptions.profile).
    profile: tuple[ProfiledLaunch, ...] = ()


# An instrumented unit reads the monotonic clock, which strict C11's <time.h>
# declares only for POSIX: the macro goes before the first include.
_PROFILE_PREFIX = "#define _POSIX_C_SOURCE 199309L\n"


def _profile_text(launches: int) -> str:
    """The clock and the counters of an instrumented unit (Note [Profile])."""
    n = max(launches, 1)
    return (
        "/* --- profile --- */\n"
        "#include <time.h>\n"
        "static inline int64_t presk__clock(void) {\n"
        "    struct timespec t;\n"
        "    clock_gettime(CLOCK_MONOTONIC, &t);\n"
        "    return (int64_t)t.tv_sec * 1000000000 + (int64_t)t.tv_nsec;\n"
        "}\n"
        f"static int64_t presk__prof_ns[{n}];\n"
        f"static int64_t presk__prof_calls[{n}];\n"
    )


# The ordinary C text: what every command but `bench --by-kernel` prints.
PLAIN = PrintOptions()


def print_unit(
    host: HostProgram,
    entry: str,
    param_names: list[str],
    banner: str,
    options: PrintOptions = PLAIN,
) -> Unit:
    """The whole translation unit of a recorded entry.

    Fields are named after the entry's parameters (`host.params`, as the
    program spells them; θ reads `theta`) and the leaves' paths, through
    `names.fields`, injective and clear of C's and the runtime's names;
    `param_names` (the same names, as the caller spells them) are used only
    where the recording did not keep them. With `options.profile`, each
    launch is timed (Note [Profile] in presk/cgen/host.py) and
    `<symbol>__profile` hands out the counters.
    """
    symbol = names.entry_symbol(entry)
    params = host.params or tuple(param_names)
    in_paths = []
    for path, _ in host.inputs:
        index, _, rest = path.partition(".")
        base = params[int(index.removeprefix("arg"))]
        in_paths.append((base, *(rest.split(".") if rest else ())))
    inputs: list[tuple[str, str, HTensor | HKey]] = []
    for field, (_, leaf) in zip(names.fields(in_paths), host.inputs, strict=True):
        ctype = "const presk_key *" if isinstance(leaf, HKey) else f"const {_c(leaf.dtype)} *"
        inputs.append((field, ctype, leaf))
    out_paths = [tuple(path.split(".")) for path, _ in host.outputs]
    outputs: list[tuple[str, str, HTensor]] = []
    for field, (_, leaf) in zip(names.fields(out_paths), host.outputs, strict=True):
        outputs.append((field, f"{_c(leaf.dtype)} *", leaf))
    in_fields = (
        "".join(f"    {t}{'' if t.endswith('*') else ' '}{n};\n" for n, t, _ in inputs)
        or "    char unused;\n"
    )
    out_fields = "".join(f"    {t}{n};\n" for n, t, _ in outputs)
    interface = (
        f"typedef struct {{\n{in_fields}}} {symbol}_in;\n"
        f"typedef struct {{\n{out_fields}}} {symbol}_out;\n"
        f"int {symbol}(presk_arena *arena, const {symbol}_in *in, {symbol}_out *out);\n"
    )
    args = [
        "arena->base",
        "arena->threads > 0 ? arena->threads : 1",
        *(f"in->{n}" for n, _, _ in inputs),
        *(f"out->{n}" for n, _, _ in outputs),
    ]
    # An entry whose buffers are all its outputs' needs no arena (and `size < 0u` warns).
    check = (
        f"    if (arena->size < {host.arena_bytes}u) {{\n        return 1;\n    }}\n"
        if host.arena_bytes
        else ""
    )
    entry_c = (
        f"int {symbol}(presk_arena *arena, const {symbol}_in *in, {symbol}_out *out) {{\n"
        f"{check}"
        f"    {host.entry.c_name}({', '.join(args)});\n"
        "    return 0;\n"
        "}\n"
    )
    banner_text = names.comment(f"{banner} (presk {__version__})", newlines=True)
    kernels = tuple(kernel_c(k, name) for name, k in host.kernels)
    profiler = Profiler() if options.profile or options.capture else None
    if profiler is not None and options.capture:
        profiler.inputs = {name: tuple(_bytes(b) for b in k.inputs) for name, k in host.kernels}
    functions = tuple(function_c(f, profiler) for f in host.functions)
    runtime = runtime_text()
    if profiler is not None:
        n = len(profiler.launches)
        runtime += "\n" + _profile_text(n)
        if options.capture:
            runtime += f"static char *presk__cap[{max(n, 1)}];\n"
            interface += f"void {symbol}__capture(int64_t i, char *dst);\n"
            entry_c += (
                f"void {symbol}__capture(int64_t i, char *dst) {{\n    presk__cap[i] = dst;\n}}\n"
            )
        # Declared in the interface, so C and cffi see one prototype.
        interface += f"int64_t {symbol}__profile(int64_t **ns, int64_t **calls);\n"
        entry_c += (
            f"int64_t {symbol}__profile(int64_t **ns, int64_t **calls) {{\n"
            "    *ns = presk__prof_ns;\n"
            "    *calls = presk__prof_calls;\n"
            f"    return {n};\n"
            "}\n"
        )
    text = (
        env()
        .get_template("unit.c.j2")
        .render(
            banner=banner_text,
            runtime=runtime,
            kernels=kernels,
            functions=functions,
            interface=interface,
            entry=entry_c,
        )
    )
    if profiler is not None:
        text = _PROFILE_PREFIX + text
    cdef = (
        "typedef struct presk_arena { char *base; size_t size; int threads; } presk_arena;\n"
        + KEY_CDEF
        + "\n"
        + interface
    )
    return Unit(
        text,
        cdef,
        symbol,
        inputs,
        outputs,
        host.arena_bytes,
        banner_text,
        kernels,
        functions,
        interface,
        entry_c,
        tuple(profiler.launches) if profiler is not None else (),
    )


def _bytes(buffer: kir.Buffer) -> str:
    """A kernel input's bytes, as C: a key is one `presk_key`."""
    if buffer.dtype == "key":
        return "sizeof(presk_key)"
    return str(buffer.size * Dtype(buffer.dtype).size)


def _c(dtype: str) -> str:
    return Dtype(dtype).c_type
