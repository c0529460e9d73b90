"""`presk export --target c --serve`: a C program that generates text, as `presk serve` does.

The directory is the generation functions as a library (`--mode library`, so the
sampling and the greedy entry share one runtime without clashing: lib.mk builds it)
and `run.c`, the loop: the vocabulary as a C table, the prompt encoded, the window of
the context, the key of each step, the tokens printed as they come. `weights.psk.d` is
a copy of the weights; `make check` compares the program's greedy and sampled tokens
with those `presk serve --backend native` gave when the directory was written.
"""

from __future__ import annotations

from dataclasses import dataclass

from presk import names
from presk.backends.native import CompiledEntry
from presk.cgen.program import _env
from presk.dtypes import Dtype
from presk.export.c import ExportError, ExportPlan
from presk.export.escape import make_comment, sh_comment, sh_word
from presk.export.library import CLibrary, LibraryEntry, entry_prefixes, plan_library
from presk.host.program import HKey, HTensor

NAME = "model"


@dataclass(frozen=True)
class CServe:
    """What a `--serve` export writes; the expected tokens come from the native backend."""

    sample: CompiledEntry
    greedy: CompiledEntry | None
    sample_text: str
    greedy_text: str | None
    dims: dict[str, int]
    context: int
    vocab: tuple[str, ...]
    leaves: tuple[tuple[str, tuple[int, ...]], ...]  # θ's leaves: path, shape
    weights: bytes
    source: str
    realize: str
    threads: int
    directory: str
    ids: tuple[int, ...]  # the prompt of `make check`
    tokens: int
    seed: int
    temperature: str  # as written on run's command line
    expected_greedy: str | None
    expected_sampled: str


def _bind(compiled: CompiledEntry, ins: str, outs: str, key: str, thetas: int) -> list[str]:
    """Lines of run.c pointing an entry's struct fields at the loop's buffers."""
    lines: list[str] = []
    fields = compiled.unit.inputs
    tensors = [f for f in fields if not isinstance(f[2], HKey)]
    if len(tensors) < thetas + 2:
        raise ExportError("the generation function takes no window")
    for i, (field, _, leaf) in enumerate(fields):
        if isinstance(leaf, HKey):
            lines.append(f"{ins}.{field} = &{key};")
        elif i < thetas:
            lines.append(f"{ins}.{field} = theta[{i}];")
        elif i == thetas:
            lines.append(f"{ins}.{field} = window;")
        elif i == thetas + 1:
            lines.append(f"{ins}.{field} = &last;")
        else:
            lines.append(f"{ins}.{field} = &scale;")
    (field, _, _), *rest = compiled.unit.outputs
    if rest:
        raise ExportError("the generation function returns more than the next token")
    lines.append(f"{outs}.{field} = &next;")
    return lines


def _real_type(compiled: CompiledEntry, thetas: int) -> str:
    kinds = {
        leaf.dtype for _, _, leaf in compiled.unit.inputs[:thetas] if isinstance(leaf, HTensor)
    }
    if len(kinds) != 1 or next(iter(kinds)) not in ("f64", "f32"):
        raise ExportError(
            "--serve exports weights stored in one type, f64 or f32 (this realization "
            f"stores them as {', '.join(sorted(kinds))})"
        )
    return Dtype(next(iter(kinds))).c_type


def plan_serve(request: CServe) -> ExportPlan:
    """Every file of the generator, printed before any is written."""
    entries = [LibraryEntry(request.sample, request.sample_text, request.dims, "the next id")]
    if request.greedy is not None and request.greedy_text is not None:
        entries.append(
            LibraryEntry(request.greedy, request.greedy_text, request.dims, "the next id")
        )
    library = plan_library(
        CLibrary(
            NAME,
            tuple(entries),
            request.source,
            request.realize,
            request.threads,
            request.directory,
        )
    )
    files = dict(library.files)
    files["lib.mk"] = files.pop("Makefile")
    prefixes = entry_prefixes(NAME, [e.entry_text for e in entries])
    thetas = len(request.leaves)
    env = _env()
    banner = names.comment(
        f"{request.source}: a generator of {request.sample_text} at context "
        f"{request.context} in {request.realize}"
    )
    files["run.c"] = env.get_template("serve/run.c.j2").render(
        banner=banner,
        name=NAME,
        context=request.context,
        real_type=_real_type(request.sample, thetas),
        vocab=[names.c_string(t) for t in request.vocab],
        leaves=[
            {
                "path": names.c_string(path),
                "rank": len(shape),
                "dims": ", ".join(f"{d}u" for d in shape) or "0u",
            }
            for path, shape in request.leaves
        ],
        sample_prefix=prefixes[0],
        greedy_prefix=prefixes[1] if len(prefixes) > 1 else "",
        has_greedy=len(prefixes) > 1,
        bind_sample=_bind(request.sample, "in", "out", "key", thetas),
        bind_greedy=(
            _bind(request.greedy, "gin", "gout", "key", thetas)
            if request.greedy is not None
            else []
        ),
    )
    split = request.sample.host.splits or (request.greedy and request.greedy.host.splits)
    files["Makefile"] = env.get_template("serve/Makefile.j2").render(
        banner=make_comment(banner), name=NAME, openmp="-fopenmp" if split else ""
    )
    files["conformance/check.sh"] = env.get_template("serve/check.sh.j2").render(
        banner=sh_comment(banner),
        ids=",".join(str(i) for i in request.ids),
        tokens=request.tokens,
        seed=request.seed,
        temperature=sh_word(request.temperature),
        has_greedy=request.expected_greedy is not None,
    )
    from presk import resources

    for relative in ("runtime/c/presk_data.h", "runtime/c/presk_data.c"):
        files[relative.rsplit("/", 1)[1]] = resources.read(relative)
    files["weights.psk.d"] = request.weights
    files["conformance/expected_sampled.txt"] = request.expected_sampled
    if request.expected_greedy is not None:
        files["conformance/expected_greedy.txt"] = request.expected_greedy
    summary = (
        f"presk export: a generator of `{request.sample_text}` at context {request.context} "
        f"in {request.realize} into {request.directory}; `make -C {sh_word(request.directory)}` "
        f"builds ./run, `make -C {sh_word(request.directory)} check` compares its tokens with "
        "presk serve's"
    )
    return ExportPlan(files, summary)
