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

import jinja2

from presk import __version__, resources
from presk.cgen.c_printer import kernel_c, safe_comment
from presk.host.program import _C_TYPE, FunctionInstance, HKey, HostProgram, HTensor


@cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resources.root() / "templates" / "c")),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def c_name(text: str) -> str:
    """A leaf path or entry name as a C identifier (nothing else reaches C)."""
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


def _strip_local_includes(text: str) -> str:
    return re.sub(r'^#include "[^"]+"\n', "", text, flags=re.MULTILINE)


# The runtime's key, declared for cffi (presk_rng.h defines it for C).
KEY_CDEF = "typedef struct { uint32_t k[2]; } presk_key;"


@cache
def runtime_text() -> str:
    """The runtime and the libm, pasted into every unit."""
    parts = [
        resources.read("runtime/c/presk_rt.h"),
        resources.read("runtime/c/presk_rng.h"),
        _strip_local_includes(resources.read("runtime/c/presk_rng.c")),
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


def _function(inst: FunctionInstance) -> str:
    params = ["char *frame", "int threads"]
    params += [f"{ctype}{'' if ctype.endswith('*') else ' '}{name}" for ctype, name in inst.params]
    params += [f"{ctype}{name}" for ctype, name in inst.outputs]
    body = [line.replace("FRAME_END", str(inst.frame)) for line in inst.body]
    # Every parameter is marked used: a function need not read all its inputs
    # (a gradient may ignore a value), and -Wextra would warn.
    unused = ["frame", "threads", *(name for _, name in inst.params), *(n for _, n in inst.outputs)]
    return (
        _env()
        .get_template("function.c.j2")
        .render(
            source=safe_comment(inst.source),
            name=inst.c_name,
            params=", ".join(params),
            unused=unused,
            locals=inst.locals,
            body=body,
        )
    )


def print_unit(host: HostProgram, entry: str, param_names: list[str], banner: str) -> Unit:
    """The whole translation unit of a recorded entry."""
    symbol = "presk_" + c_name(entry)
    inputs: list[tuple[str, str, HTensor | HKey]] = []
    for path, leaf in host.inputs:
        index, _, rest = path.partition(".")
        base = param_names[int(index.removeprefix("arg"))]
        field = c_name(base + ("_" + rest if rest else ""))
        ctype = "const presk_key *" if isinstance(leaf, HKey) else f"const {_C_TYPE[leaf.dtype]} *"
        inputs.append((field, ctype, leaf))
    outputs: list[tuple[str, str, HTensor]] = []
    for path, leaf in host.outputs:
        outputs.append((c_name(path), f"{_C_TYPE[leaf.dtype]} *", leaf))
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
    entry_c = (
        f"int {symbol}(presk_arena *arena, const {symbol}_in *in, {symbol}_out *out) {{\n"
        f"    if (arena->size < {host.arena_bytes}u) {{\n"
        "        return 1;\n"
        "    }\n"
        f"    {host.entry.c_name}({', '.join(args)});\n"
        "    return 0;\n"
        "}\n"
    )
    banner_text = safe_comment(f"{banner} (presk {__version__})")
    kernels = tuple(kernel_c(k, name) for name, k in host.kernels)
    functions = tuple(_function(f) for f in host.functions)
    text = (
        _env()
        .get_template("unit.c.j2")
        .render(
            banner=banner_text,
            runtime=runtime_text(),
            kernels=kernels,
            functions=functions,
            interface=interface,
            entry=entry_c,
        )
    )
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
    )
