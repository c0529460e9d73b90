"""`presk export --target c --mode library`: entries of one program as a C library.

Each entry is compiled exactly as the native backend runs it (`compile_entry`),
and its kernels, functions, interface and entry are written as the native unit
prints them, one translation unit per entry (`NAME_entryK.c`, including
`NAME_kernelsK.c`): their kernels and functions are `static`, so entries of one
program never clash. The runtime and the libm are compiled once. `NAME.h` is the
API, self-contained (it includes no presk header): each entry's `_in` and `_out`
structs, a context holding the arena, the calls, the version and realization;
`NAME.c` copies the API's structs into the entries' own and calls them.

The Makefile compiles everything with `-fvisibility=hidden`; only the API is
marked visible. The shared library then exports the API alone, and the static
one holds a single relocatable object whose hidden symbols `objcopy
--localize-hidden` made local, so two presk libraries, each with its own
runtime, link into one program.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from presk import __version__, names, resources
from presk.backends.native import CompiledEntry
from presk.cgen.program import _env
from presk.diagnostics import UsageError
from presk.dtypes import Dtype
from presk.export.c import ExportError, ExportPlan
from presk.export.escape import make_comment, make_word, markdown, sh_word
from presk.host.program import HKey, HTensor

LIBRARY_RUNTIME = (
    "runtime/c/presk_rt.h",
    "runtime/c/presk_rng.h",
    "runtime/c/presk_rng.c",
    "libm/musl/presk_libm.h",
    "libm/musl/presk_libm.c",
)

# What NAME.h defines besides the entries' names: NAME_<suffix>.
_FIXED = [
    "H",
    "API",
    "VERSION",
    "REALIZATION",
    "ctx",
    "key",
    "arena_bytes",
    "create",
    "destroy",
    "version",
    "realization",
]
_ENTRY_SUFFIXES = ("in", "out", "call", "arena_bytes")


@dataclass(frozen=True)
class LibraryEntry:
    """One entry of the library: compiled, with the text the user named it by."""

    compiled: CompiledEntry
    entry_text: str
    dims: dict[str, int]
    output_type: str


@dataclass(frozen=True)
class CLibrary:
    """What `export --mode library` writes. `realize` as the user gave it."""

    name: str
    entries: tuple[LibraryEntry, ...]
    source: str
    realize: str
    threads: int
    directory: str


def library_name(flag: str | None, source: str) -> str:
    """The library's NAME: `--name` as given (a plain C identifier), else the file's stem.

    A stem is made one: runs of other characters become `_`, and a leading digit
    gets `psk_`; a stem that still is not plain asks for `--name`.
    """
    if flag is not None:
        if not names.is_plain(flag) or not flag.isascii():
            raise UsageError(
                f"--name {flag!r}: expected a C identifier of letters, digits and single "
                "underscores, not starting with a digit or `_`, not a C keyword or `presk_…`"
            )
        return flag
    stem = os.path.basename(source)
    stem = stem[: -len(".psk")] if stem.endswith(".psk") else stem
    name = re.sub(r"[^A-Za-z0-9]+", "_", stem).strip("_")
    if name[:1].isdigit():
        name = "psk_" + name
    if not names.is_plain(name):
        raise UsageError(f"{source}: its stem makes no library name: give --name NAME")
    return name


def entry_prefixes(name: str, texts: list[str]) -> list[str]:
    """Each entry's prefix in the API: NAME alone for one entry, else NAME_<entry>."""
    if len(texts) == 1:
        return [name]
    prefixes = []
    for text in texts:
        # Punctuation of ASCII entries (`Linear{3, 2}.apply`) reads as `_`; other text escapes.
        short = re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")
        plain = text.isascii() and names.is_plain(short)
        prefixes.append(f"{name}_{short if plain else names.escaped((text,))}")
    return prefixes


def _shape(leaf: HTensor) -> str:
    return f"{leaf.dtype}[" + ", ".join(f"{n}: {s}" if n else str(s) for n, s in leaf.axes) + "]"


def _c_type(dtype: str) -> str:
    return Dtype(dtype).c_type


@dataclass(frozen=True)
class _EntryText:
    """What the templates place for one entry."""

    text: str
    prefix: str
    call: str
    symbol: str  # the entry's symbol in the library: the native one and `_K`
    comment: str
    in_fields: list[str]
    out_fields: list[str]
    bind: list[str]
    arena_bytes: int
    inputs: list[str]
    outputs: list[str]
    files: str


def _entry_text(name: str, prefix: str, index: int, entry: LibraryEntry) -> _EntryText:
    unit = entry.compiled.unit
    in_fields, bind, inputs = [], [], []
    bounds = entry.compiled.input_bounds()
    for (field, _, leaf), bound in zip(unit.inputs, bounds, strict=True):
        if isinstance(leaf, HKey):
            in_fields.append(f"const {name}_key *{field}; /* a random key */")
            bind += [
                f"presk_key key_{field};",
                f"key_{field}.k[0] = in->{field}->k[0];",
                f"key_{field}.k[1] = in->{field}->k[1];",
                f"args.{field} = &key_{field};",
            ]
            inputs.append(f"`{field}`: a random key (`{name}_key`, two 32-bit words)")
            continue
        in_fields.append(f"const {_c_type(leaf.dtype)} *{field}; /* {_shape(leaf)} */")
        if bound is not None and leaf.size:
            # The entry indexes tables by these values unchecked: refuse any outside [0, bound).
            bind.append(
                f"for (size_t j = 0; j < {leaf.size}u; j++) {{ if (in->{field}[j] < 0 || "
                f"in->{field}[j] >= {bound}) {{ return 3; }} }}"
            )
        bind.append(f"args.{field} = in->{field};")
        inputs.append(f"`{field}`: {_shape(leaf)}")
    if not in_fields:
        in_fields = ["char unused;"]
    out_fields, outputs = [], []
    for field, _, leaf in unit.outputs:
        out_fields.append(f"{_c_type(leaf.dtype)} *{field}; /* {_shape(leaf)} */")
        bind.append(f"results.{field} = out->{field};")
        outputs.append(f"`{field}`: {_shape(leaf)}")
    at = ", ".join(f"{k} = {v}" for k, v in entry.dims.items()) or "its shapes"
    comment = names.comment(f"{entry.entry_text} at {at}: returns {entry.output_type}")
    files = f"{name}_entry{index}.c`, `{name}_entry{index}.h`, `{name}_kernels{index}.c"
    call = f"{prefix}_call"
    return _EntryText(
        markdown(entry.entry_text),
        prefix,
        call,
        f"{unit.symbol}_{index}",
        comment,
        in_fields,
        out_fields,
        bind,
        unit.arena_bytes,
        [markdown(x) for x in inputs],
        [markdown(x) for x in outputs],
        files,
    )


def _check_names(name: str, entries: list[_EntryText]) -> None:
    """Refuse an API whose names meet: two entries alike, or a field a macro would rewrite."""
    defined = [f"{name}_{s}" for s in _FIXED]
    for e in entries:
        # One entry's prefix is NAME: NAME_arena_bytes is then its own.
        own = [x for x in _ENTRY_SUFFIXES if e.prefix != name or x != "arena_bytes"]
        defined += [f"{e.prefix}_{x}" for x in own]
    if len(set(defined)) != len(defined):
        raise ExportError("two entries give the library the same C names: name each entry once")
    macros = {f"{name}_{s}" for s in ("H", "API", "VERSION", "REALIZATION")}
    for e in entries:
        for line in e.in_fields + e.out_fields:
            member = line.split(";")[0].split()[-1].lstrip("*")
            if member in macros:
                raise ExportError(f"the field `{member}` is a macro of {name}.h: give --name")


def _example(name: str, entry: _EntryText, compiled: CompiledEntry) -> list[str]:
    """A short C program calling the first entry on zero inputs."""
    unit = compiled.unit
    lines = ["#include <stdio.h>", f'#include "{name}.h"', "", "int main(void) {"]
    init_in, init_out = [], []
    for field, _, leaf in unit.inputs:
        if isinstance(leaf, HKey):
            lines.append(f"    static {name}_key in_{field} = {{{{1u, 2u}}}};")
            init_in.append(f".{field} = &in_{field}")
            continue
        n = max(1, leaf.size)
        lines.append(f"    static {_c_type(leaf.dtype)} in_{field}[{n}]; /* {_shape(leaf)} */")
        init_in.append(f".{field} = in_{field}")
    for field, _, leaf in unit.outputs:
        n = max(1, leaf.size)
        lines.append(f"    static {_c_type(leaf.dtype)} out_{field}[{n}]; /* {_shape(leaf)} */")
        init_out.append(f".{field} = out_{field}")
    lines += [
        f"    {entry.prefix}_in in = {{{', '.join(init_in) or '0'}}};",
        f"    {entry.prefix}_out out = {{{', '.join(init_out)}}};",
        f"    {name}_ctx *ctx = {name}_create();",
        "    if (ctx == NULL) {",
        "        return 1;",
        "    }",
        f"    int status = {entry.call}(ctx, &in, &out);",
        f"    {name}_destroy(ctx);",
    ]
    first, _, leaf = unit.outputs[0]
    if leaf.dtype in ("f64", "f32"):
        lines.append(f'    printf("%g\\n", (double)out_{first}[0]);')
    elif leaf.dtype == "i64":
        lines.append(f'    printf("%lld\\n", (long long)out_{first}[0]);')
    lines += ["    return status;", "}"]
    return lines


def plan_library(request: CLibrary) -> ExportPlan:
    """Print everything a library export writes, before any file is touched."""
    name, entries = request.name, request.entries
    prefixes = entry_prefixes(name, [e.entry_text for e in entries])
    pairs = enumerate(zip(prefixes, entries, strict=True))
    texts = [_entry_text(name, prefix, i, entry) for i, (prefix, entry) in pairs]
    _check_names(name, texts)
    env = _env()
    common = {k: v for k, v in entries[0].dims.items() if all(e.dims.get(k) == v for e in entries)}
    at = ", ".join(f"{k} = {v}" for k, v in common.items()) or "their shapes"
    listed = ", ".join(e.entry_text for e in entries)
    banner = names.comment(
        f"{request.source}: library {name} of {listed} at {at} in {request.realize} "
        f"(presk {__version__})"
    )
    files: dict[str, str | bytes] = {}
    headers = []
    objects = [f"{name}.o"]
    rules = [{"target": f"{name}.o", "sources": f"{name}.c", "source": f"{name}.c"}]
    for i, entry in enumerate(entries):
        unit = entry.compiled.unit
        header, source, kernels = f"{name}_entry{i}.h", f"{name}_entry{i}.c", f"{name}_kernels{i}.c"
        files[header] = env.get_template("library/entry.h.j2").render(
            banner=unit.banner,
            name=name,
            guard=f"PRESK_LIB_ENTRY{i}_H",
            native=unit.symbol,
            renamed=texts[i].symbol,
            interface=unit.interface,
        )
        files[source] = env.get_template("library/entry.c.j2").render(
            banner=unit.banner,
            header=header,
            kernels=kernels,
            functions=unit.functions,
            entry=unit.entry,
        )
        files[kernels] = env.get_template("library/kernels.c.j2").render(
            banner=unit.banner, includer=source, kernels=unit.kernels
        )
        headers.append((header, unit.symbol))
        objects.append(f"{name}_entry{i}.o")
        rules.append({"target": objects[-1], "sources": f"{source} {kernels}", "source": source})
    for runtime in ("presk_rng", "presk_libm"):
        objects.append(f"{runtime}.o")
        rules.append({"target": objects[-1], "sources": f"{runtime}.c", "source": f"{runtime}.c"})
    arena = max(e.compiled.unit.arena_bytes for e in entries)
    files[f"{name}.h"] = env.get_template("library/api.h.j2").render(
        banner=banner,
        name=name,
        guard=f"{name}_H",
        version=names.c_string(__version__),
        realization=names.c_string(request.realize),
        entries=texts,
    )
    files[f"{name}.c"] = env.get_template("library/api.c.j2").render(
        banner=banner,
        name=name,
        headers=headers,
        arena_bytes=arena,
        threads=request.threads,
        entries=texts,
    )
    split = any(e.compiled.host.splits for e in entries)
    all_headers = [f"{name}.h", *(h for h, _ in headers), "presk_rt.h", "presk_rng.h"]
    all_headers.append("presk_libm.h")
    files["Makefile"] = env.get_template("library/Makefile.j2").render(
        banner=make_comment(banner),
        name=make_word(name),
        openmp="-fopenmp" if split else "",
        objects=" ".join(map(make_word, objects)),
        headers=" ".join(map(make_word, all_headers)),
        rules=rules,
    )
    threads_note = (
        "Split launches are OpenMP regions (link with `-fopenmp`); `OMP_NUM_THREADS=1` or "
        "`make OPENMP=` give the same bits."
        if split
        else "No launch is split among threads."
    )
    files["README.md"] = env.get_template("library/README.md.j2").render(
        title=markdown(f"lib{name}, exported by presk"),
        summary=markdown(
            f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'} of `{request.source}` "
            f"at {at}, in {request.realize}."
        ),
        version=__version__,
        source=markdown(request.source),
        entries=texts,
        name=name,
        link_openmp=" -fopenmp" if split else "",
        threads_note=threads_note,
        realization=markdown(request.realize),
        example=_example(name, texts[0], entries[0].compiled),
    )
    for relative in LIBRARY_RUNTIME:
        files[os.path.basename(relative)] = resources.read(relative)
    count = sum(len(e.compiled.host.kernels) for e in entries)
    summary = (
        f"presk export: library `{name}` of {len(entries)} "
        f"entr{'y' if len(entries) == 1 else 'ies'} ({listed}) at {at} in {request.realize}: "
        f"{count} kernels, an arena of {arena} bytes, into {request.directory}; "
        f"`make -C {sh_word(request.directory)}` builds lib{name}.a and lib{name}.so"
    )
    return ExportPlan(files, summary)


__all__ = ["CLibrary", "LibraryEntry", "entry_prefixes", "library_name", "plan_library"]
