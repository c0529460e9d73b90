"""Deterministic mutants of the example programs, their flags and their data files.

`mutant(i)` is a pure function of the index `i`: a seed case (a program of tutorial/ or
tests/examples/ with an entry and its dimensions) and one mutation of its source, of its
command line or environment, or of the `.psk.d` file given to `--data`. The mutations aim
at the known weak spots of a compiler that turns user text into C: extreme literals and
powers, deep nesting, identifiers that are C keywords or macros or that mangle alike,
sizes of zero or beyond memory, malformed flags, and data files that are corrupt or valid
but wrong. `tests/test_fuzz_commands.py` runs each mutant through `presk check`,
`presk run` and `presk run --backend native` in subprocesses.

To look at one mutant by hand:

    .venv/bin/python tests/fuzz/mutate.py 17 --out /tmp/m17

writes its directory and prints the commands the test runs, to be pasted in a shell.
"""

from __future__ import annotations

import argparse
import random
import re
import shlex
import shutil
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
SEED = 20240610
"""The fixed seed: mutant i draws from random.Random(SEED * 1_000_003 + i)."""

MINI = ("--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2")
TOKENS = "tokens.psk.d"
"""The data file of the MiniGPT seed, written by `token_file` into its directory."""


@dataclass(frozen=True)
class Seed:
    """A program and the invocation that runs it; `directory` is copied whole."""

    name: str
    directory: str  # relative to the repository root
    file: str  # inside `directory`
    entry: str
    dims: tuple[str, ...]  # NAME=N, each given as --dim
    consts: tuple[str, ...] = ()  # the flags `--const NAME=V …` as they are passed
    data: str | None = None  # a .psk.d file inside `directory` for `--data`
    prefix: bool = False  # the entry has an open prefix `...`: any --dim NAME is an axis
    sources: tuple[str, ...] = ()  # other files of `directory` worth mutating (imports)


SEEDS: tuple[Seed, ...] = (
    Seed("linear", "tutorial", "01_linear.psk", "Linear{3, 2}.apply", ("batch=4",), prefix=True),
    Seed("norm", "tutorial", "02_norm.psk", "RMSNorm{4}.apply", ("batch=2",), prefix=True),
    Seed("attend", "tutorial", "03_attention.psk", "attend", ("B=1", "T=3")),
    Seed("loss", "tutorial", "04_grad.psk", "loss", ("D=3", "B=2"), sources=("01_linear.psk",)),
    Seed("grad", "tutorial", "04_grad.psk", "loss_grad", ("D=3", "B=2"),
         sources=("01_linear.psk",)),
    Seed("pick", "tutorial", "05_sample.psk", "pick", ("B=6",)),
    Seed("tower", "tutorial", "06_tower.psk", "Tower.apply", ("batch=3",), prefix=True,
         sources=("01_linear.psk", "02_norm.psk")),
    Seed("train", "tutorial", "07_train.psk", "loss", ("B=4",), data="data/pairs.psk.d",
         sources=("06_tower.psk",)),
    Seed("mse", "tests/examples/mlp", "mlp.psk", "mse", ("D=4", "B=3")),
    Seed("mse_grad", "tests/examples/mlp", "mlp.psk", "mse_grad", ("D=2", "B=2")),
    Seed("gpt", "tests/examples/minigpt", "train_minigpt.psk", "loss", ("B=2", "T=8"),
         consts=MINI, data=TOKENS, sources=("minigpt.psk",)),
)  # fmt: skip


@dataclass
class Mutant:
    """One fuzz case: files to write over the seed's copy, and how to call presk."""

    index: int
    seed: Seed
    kind: str  # the mutation family: number, ident, collide, op, power, nest, line, ...
    description: str
    files: dict[str, bytes] = field(default_factory=dict)  # path in the directory -> bytes
    entry: str = ""
    dims: list[str] = field(default_factory=list)  # the arguments after --entry ENTRY
    env: dict[str, str] = field(default_factory=dict)
    commands: tuple[str, ...] = ("check", "run", "native")  # and "info": presk data info
    refuse: tuple[str, ...] = ()  # the commands that must refuse it: exit 1 or 2, one line

    def argv(self, command: str) -> list[str]:
        """The arguments of `presk` for `command` (check, info, run or native)."""
        seed = self.seed
        if command == "check":
            return ["check", seed.file, *seed.consts]
        if command == "info":
            return ["data", "info", seed.data or ""]
        data = ["--data", seed.data] if seed.data and self.kind.startswith("data") else []
        tail = ["--backend", "native"] if command == "native" else []
        return ["run", seed.file, "--entry", self.entry, *seed.consts, *self.dims, *data, *tail]

    def shell(self, command: str, presk: str = "presk") -> str:
        """The command line to paste into a shell in the mutant's directory."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        line = shlex.join([presk, *self.argv(command)])
        return f"{env} {line}" if env else line


# --- the vocabulary of the mutations --------------------------------------------------------

NUMBERS = (
    "0", "1", "2", "-1", "0.0", "1e400", "1e-400", "1e308", "1e-320", "1e1000000000",
    "1e-1000000000", "18446744073709551616", "4294967296", "9223372036854775808", "1025",
    "0.000000000000000000000000000000000000000000000000001", "1/3", "007", "1_000", "0x10",
    "2.", ".5", "1e", "inf", "nan",
)  # fmt: skip
C_NAMES = (
    "int", "return", "while", "for", "if", "else", "void", "char", "double", "float",
    "unsigned", "signed", "long", "short", "goto", "struct", "union", "switch", "case",
    "default", "break", "continue", "extern", "register", "volatile", "sizeof", "typedef",
    "enum", "inline", "restrict", "auto", "do", "_Bool", "bool", "true", "false",
    "NULL", "INFINITY", "NAN", "EOF", "errno", "stdin", "stdout", "__LINE__", "__FILE__",
    "PRESK_RT_H", "PRESK_LIBM_H", "main", "printf", "malloc", "free", "memcpy", "exp", "sqrt",
    "tanh", "log", "fma", "omp_get_thread_num", "presk_rt_alloc", "frame", "arena", "n",
    "i", "i0", "t", "self", "None", "lambda", "class", "def", "np", "ffi", "lib",
)  # fmt: skip
ODD_NAMES = (
    "x'", "x''", "xu27", "é", "ue9", "x_0", "θ₁", "Ω", "ŝ", "αβγ", "x̂", "_", "__x", "x__y",
    "ℓ", "𝑥", "日本", "a" * 300, "u0078", "x_", "Ü", "ǅ", "ﬁ",
)  # fmt: skip
COLLIDING = (("x'", "xu27"), ("é", "ue9"), ("x", "x_0"), ("a_b", "a__b"), ("Ω", "Ω"))
OPERATORS = ("+", "-", "*", "/", "^", "·", "@", "%", "==", "<", "|>")
POWERS = ("^100000000", "^(2^64)", "^0", "^-1", "^0.5", "^1e400", "^18446744073709551617",
          "^(1/3)", "^-100000000")  # fmt: skip
DIM_VALUES = ("0", "1", "2", "7", "1000000000000", "18446744073709551616", "-1", "abc", "",
              "1e3", "3.0", "99999999999999999999999999999")  # fmt: skip
REALIZE = ("f16", "F64", "", "bf32", "f64,f32", "@missing.txt", "@", "int")
THREADS = ("0", "-1", "abc", "100000", "", "1.5")
ENV_THREADS = ("abc", "0", "-2", "99999999", "1e3", "2x")
CONST_VALUES = ("0", "1", "-1", "1/0", "1e400", "3/2", "99999999999999999999", "abc", "")
# A user-visible name in a code line: a binding (param/let/fn/module/use) or a parameter.
_BINDER = re.compile(r"(?:\b(?:param|let|fn|module|use|const)\s+|[({,]\s*)([^\W\d]\w*'*)\s*[:{(=]")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])")
_OPERATOR = re.compile(r"(?<![-<>=|])(?:[+*/^·]|-(?![->]))(?![-=>])")


def _code(line: str) -> str:
    """The line without its comment (`--` to the end)."""
    return line.split("--", 1)[0]


def _rename(text: str, old: str, new: str) -> str:
    """Every occurrence of the name `old` outside comments becomes `new`."""
    pattern = re.compile(rf"(?<![\w']){re.escape(old)}(?![\w'])")
    lines = text.split("\n")
    for i, line in enumerate(lines):
        code = _code(line)
        lines[i] = pattern.sub(lambda _: new, code) + line[len(code) :]
    return "\n".join(lines)


def _sites(text: str, pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    """(start, end) of each match of `pattern` in the code of `text`."""
    sites, offset = [], 0
    for line in text.split("\n"):
        sites += [(offset + m.start(), offset + m.end()) for m in pattern.finditer(_code(line))]
        offset += len(line) + 1
    return sites


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


# --- source mutations -----------------------------------------------------------------------


def _replace_site(rng: random.Random, text: str, pattern: re.Pattern[str],
                  make: list[str] | tuple[str, ...]) -> tuple[str, str] | None:  # fmt: skip
    sites = _sites(text, pattern)
    if not sites:
        return None
    start, end = rng.choice(sites)
    old, new = text[start:end], rng.choice(make)
    shown = new if len(new) <= 40 else f"{new[:20]}…({len(new)} characters)"
    return text[:start] + new + text[end:], f"line {_line_of(text, start)}: `{old}` → `{shown}`"


def _huge_number(rng: random.Random) -> str:
    digits = rng.choice((25, 400, 5000))
    return rng.choice("123456789") + "".join(rng.choice("0123456789") for _ in range(digits - 1))


Renames = tuple[tuple[str, str], ...]


def mutate_source(rng: random.Random, text: str) -> tuple[str, str, str, Renames]:
    """A mutation of a program's text: (kind, description, new text, names renamed)."""
    kinds = ("number", "number", "number", "ident", "ident", "collide", "op", "power", "nest",
             "line", "line")  # fmt: skip
    for _ in range(20):
        kind = rng.choice(kinds)
        done = _mutate_once(rng, kind, text)
        if done is not None and done[0] != text:
            return kind, done[1], done[0], done[2] if len(done) == 3 else ()
    return "line", "line 1: deleted", "\n".join(text.split("\n")[1:]), ()


def _mutate_once(
    rng: random.Random, kind: str, text: str
) -> tuple[str, str] | tuple[str, str, Renames] | None:
    lines = text.split("\n")
    code_lines = [i for i, line in enumerate(lines) if _code(line).strip()]
    binders = sorted({m.group(1) for line in lines for m in _BINDER.finditer(_code(line))})
    binders = [b for b in binders if b not in ("dim", "nat", "f64", "key", "real")]
    match kind:
        case "number":
            numbers = [*NUMBERS, _huge_number(rng)]
            return _replace_site(rng, text, _NUMBER, numbers)
        case "ident":
            if not binders:
                return None
            old, new = rng.choice(binders), rng.choice((*C_NAMES, *ODD_NAMES))
            return _rename(text, old, new), f"`{old}` renamed `{new}` everywhere", ((old, new),)
        case "collide":
            if len(binders) < 2:
                return None
            a, b = rng.sample(binders, 2)
            new_a, new_b = rng.choice(COLLIDING)
            if new_a in binders or new_b in binders:
                return None
            text = _rename(_rename(text, a, new_a), b, new_b)
            return (
                text,
                f"`{a}` renamed `{new_a}` and `{b}` renamed `{new_b}`",
                ((a, new_a), (b, new_b)),
            )
        case "op":
            return _replace_site(rng, text, _OPERATOR, OPERATORS)
        case "power":
            sites = _sites(text, re.compile(r"\^\s*\d+"))
            if sites:
                return _replace_site(rng, text, re.compile(r"\^\s*\d+"), POWERS)
            return _replace_site(rng, text, re.compile(r"(?<![\w'])x(?![\w'])"),
                                 [f"x{p}" for p in POWERS])  # fmt: skip
        case "nest":
            depth = rng.choice((50, 300, 1000, 3000))
            sites = _sites(text, _NUMBER)
            if not sites:
                return None
            start, end = rng.choice(sites)
            old = text[start:end]
            if rng.random() < 0.5:
                new, what = "(" * depth + old + ")" * depth, f"{depth} parentheses"
            else:
                new, what = " + ".join([old] + ["0"] * depth), f"a sum of {depth + 1} terms"
            line = _line_of(text, start)
            return text[:start] + new + text[end:], f"line {line}: `{old}` in {what}"
        case "line":
            i = rng.choice(code_lines)
            action = rng.choice(("duplicated", "deleted", "swapped with the next"))
            if action == "duplicated":
                lines.insert(i, lines[i])
            elif action == "deleted":
                del lines[i]
            elif i + 1 < len(lines):
                lines[i], lines[i + 1] = lines[i + 1], lines[i]
            return "\n".join(lines), f"line {i + 1}: {action}"
    raise AssertionError(kind)


# --- flag and environment mutations ---------------------------------------------------------


def mutate_flags(rng: random.Random, m: Mutant) -> None:
    """Change the dims, the entry, --realize, --threads, PRESK_THREADS or a flag value."""
    seed = m.seed
    choice = rng.choice(("dim", "dim", "dim", "unknown_dim", "entry", "realize", "threads",
                         "env_threads", "value", "const"))  # fmt: skip
    m.kind = f"flag:{choice}"
    match choice:
        case "dim":
            i = rng.randrange(len(m.dims) // 2)
            name = m.dims[2 * i + 1].split("=")[0]
            value = rng.choice(DIM_VALUES)
            if rng.random() < 0.2:
                del m.dims[2 * i : 2 * i + 2]
                m.description = f"--dim {name} left out"
            else:
                m.dims[2 * i + 1] = f"{name}={value}"
                m.description = f"--dim {name}={value}"
        case "unknown_dim":
            name = rng.choice(("Zzz", "b", "BATCH", "seq", "é", "1", ""))
            m.dims += ["--dim", f"{name}=3"]
            m.description = f"--dim {name}=3 (not a dimension of the entry)"
            if not seed.prefix:
                m.refuse = ("run", "native")
        case "entry":
            numbers = _sites(m.entry, _NUMBER)
            if numbers:
                start, end = rng.choice(numbers)
                new = rng.choice(("0", "1", "-1", "1000000000000", "1e400", "x", ""))
                m.entry = m.entry[:start] + new + m.entry[end:]
            else:
                m.entry = rng.choice((m.entry + "'", m.entry + ".apply", "", " ", "{", "é"))
            m.description = f"--entry {m.entry!r}"
        case "realize":
            value = rng.choice(REALIZE)
            m.dims += ["--realize", value]
            m.description = f"--realize {value!r}"
            m.refuse = ("run", "native")
        case "threads":
            value = rng.choice(THREADS)
            m.dims += ["--threads", value]
            m.description = f"--threads {value!r}"
            m.refuse = ("native",)
        case "env_threads":
            value = rng.choice(ENV_THREADS)
            m.env["PRESK_THREADS"] = value
            m.description = f"PRESK_THREADS={value!r}"
            m.refuse = ("native",)
        case "value":
            flag = rng.choice(("--bits", "--digits", "--seed", "--remat", "--backend"))
            value = rng.choice(("0", "-1", "7", "8", "200", "201", "1048577", "abc", "",
                                "18446744073709551616", "1e3", "store"))  # fmt: skip
            m.dims += [flag, value]
            m.description = f"{flag} {value!r}"
        case "const":
            names = sorted(set(re.findall(r"(?m)^\s*const\s+([^\W\d]\w*)", _seed_text(seed))))
            name = rng.choice([*names, "Nope"])
            value = rng.choice(CONST_VALUES)
            m.dims += ["--const", f"{name}={value}"]
            m.description = f"--const {name}={value!r}"
    m.commands = ("run", "native")


def _seed_text(seed: Seed) -> str:
    root = REPO_ROOT / seed.directory
    return "\n".join((root / f).read_text(encoding="utf-8") for f in (seed.file, *seed.sources))


# --- data file mutations --------------------------------------------------------------------


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


@dataclass
class Container:
    """A `.psk.d` file taken apart (docs/data-format.md), enough to rebuild it."""

    type: str
    count: int
    leaves: list[tuple[int, list[int], str]]  # dtype, dims, path
    data: bytes

    def encode(self, version: int = 1) -> bytes:
        def string(s: str) -> bytes:
            raw = s.encode("utf-8")
            return struct.pack("<I", len(raw)) + raw

        out = b"PSKD" + struct.pack("<I", version) + string(self.type)
        out += struct.pack("<QI", self.count, len(self.leaves))
        for dtype, dims, path in self.leaves:
            out += struct.pack(f"<BI{len(dims)}Q", dtype, len(dims), *dims) + string(path)
        out += self.data
        return out + struct.pack("<Q", fnv1a64(out))

    @staticmethod
    def decode(raw: bytes) -> Container:
        pos = 8

        def take(fmt: str) -> tuple[int, ...]:
            nonlocal pos
            values = struct.unpack_from(fmt, raw, pos)
            pos += struct.calcsize(fmt)
            return values

        def string() -> str:
            nonlocal pos
            (n,) = take("<I")
            pos += n
            return raw[pos - n : pos].decode("utf-8")

        type_ = string()
        count, n_leaves = take("<QI")
        leaves = []
        for _ in range(n_leaves):
            dtype, rank = take("<BI")
            dims = list(take(f"<{rank}Q"))
            leaves.append((dtype, dims, string()))
        return Container(type_, count, leaves, raw[pos:-8])


def token_file(bad: int | None = None) -> bytes:
    """MiniGPT's data: 4 samples of (ids, targets), idx[64][seq: 8] each; `bad` one index."""
    ids = [(7 * i + 3) % 64 for i in range(4 * 16)]
    if bad is not None:
        ids[5] = bad
    data = b"".join(struct.pack("<q", v) for v in ids)
    leaves = [(3, [8], "0"), (3, [8], "1")]
    return Container("(idx[64][seq: 8], idx[64][seq: 8])", 4, leaves, data).encode()


_ITEM = {0: 8, 1: 4, 2: 2, 3: 8}


def mutate_data(rng: random.Random, m: Mutant, raw: bytes) -> None:
    """Corrupt the seed's `--data` file, or rewrite it as a valid file with bad contents."""
    box = Container.decode(raw)
    sample = sum(_ITEM[d] * _product(dims) for d, dims, _ in box.leaves)
    choice = rng.choice(("truncate", "truncate", "flip", "flip", "zero", "few", "values",
                         "type", "dims", "dtype", "version", "index", "extra"))  # fmt: skip
    m.kind = f"data:{choice}"
    m.refuse = ("run", "native")
    new: bytes
    match choice:
        case "truncate":
            cut = rng.choice((0, 3, 4, 8, 12, 20, rng.randrange(len(raw)), len(raw) - 1))
            new, m.description = raw[:cut], f"{m.seed.data} cut to {cut} of {len(raw)} bytes"
        case "flip":
            at = rng.randrange(len(raw))
            bit = 1 << rng.randrange(8)
            new = raw[:at] + bytes([raw[at] ^ bit]) + raw[at + 1 :]
            m.description = f"{m.seed.data}: byte {at} xor {bit}"
        case "zero":
            box.count, box.data = 0, b""
            new, m.description = box.encode(), f"{m.seed.data}: zero samples"
        case "few":
            box.count = 1
            box.data = box.data[:sample]
            new, m.description = box.encode(), f"{m.seed.data}: one sample, fewer than a batch"
        case "values":
            value = rng.choice((float("nan"), float("inf"), -float("inf"), 1e308, 5e-324, 0.0))
            real = box.leaves[0][0] == 0
            if not real:  # an index out of its bound is no value, unlike any real
                value = rng.choice((-1, 2**63 - 1, 64))
            data = bytearray(box.data)
            for _ in range(3):
                at = 8 * rng.randrange(max(1, len(data) // 8))
                data[at : at + 8] = struct.pack("<d" if real else "<q", value)
            box.data = bytes(data)
            new, m.description = box.encode(), f"{m.seed.data}: values set to {value}"
            if real:
                m.refuse = ()
        case "type":
            box.type = rng.choice(("ℝ[model: 5]", "", "garbage", "\x1b[31mred\x1b[0m", "a\nb",
                                   "(ℝ[4], ℝ[4], ℝ[4])", "idx[0][4]", "ℝ[model: 4]",
                                   "(" * 500 + ")" * 500, "params Linear{3, 2}"))  # fmt: skip
            new, m.description = box.encode(), f"{m.seed.data}: type {box.type!r}"
        case "dims":
            dtype, dims, path = box.leaves[0]
            dims = [rng.choice((0, 5, 2**40, 2**64 - 1))] + dims[1:]
            box.leaves[0] = (dtype, dims, path)
            new, m.description = box.encode(), f"{m.seed.data}: leaf 0 dims {dims}"
        case "dtype":
            dtype, dims, path = box.leaves[0]
            dtype = rng.choice((0, 1, 2, 3, 4, 255))
            box.leaves[0] = (dtype, dims, path)
            new, m.description = box.encode(), f"{m.seed.data}: leaf 0 dtype {dtype}"
            m.refuse = ()  # a real leaf given as another real type may be accepted
        case "version":
            version = rng.choice((0, 2, 2**32 - 1))
            new, m.description = box.encode(version), f"{m.seed.data}: version {version}"
        case "index":
            if m.seed.data == TOKENS:
                bad = rng.choice((64, -1, 2**63 - 1, 1000))
                new, m.description = token_file(bad), f"{TOKENS}: an index {bad} in idx[64]"
            else:
                box.leaves = box.leaves[:1]
                new, m.description = box.encode(), f"{m.seed.data}: one leaf only"
        case "extra":
            new, m.description = raw + b"\0" * 8, f"{m.seed.data}: 8 bytes after the checksum"
    m.files[m.seed.data or ""] = new
    m.commands = ("info", "run", "native")
    if choice in ("truncate", "flip", "version", "extra", "dims"):
        m.refuse += ("info",)  # not a container: `data info` refuses it too


def _product(dims: list[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


# --- the mutants ----------------------------------------------------------------------------


def mutant(index: int) -> Mutant:
    """Mutant number `index`: the same on every machine and at every scale."""
    rng = random.Random(SEED * 1_000_003 + index)
    seed = rng.choice(SEEDS)
    dims = [arg for d in seed.dims for arg in ("--dim", d)]
    m = Mutant(index, seed, "", "", entry=seed.entry, dims=dims)
    if seed.data == TOKENS:
        m.files[TOKENS] = token_file()
    roll = rng.random()
    if roll < 0.55:
        target = rng.choice((seed.file, seed.file, *seed.sources))
        text = (REPO_ROOT / seed.directory / target).read_text(encoding="utf-8")
        kind, what, new, renames = mutate_source(rng, text)
        m.kind, m.description = kind, f"{target} {what}"
        for old, name in renames:  # the entry and --dim follow a renamed name
            m.entry = _rename(m.entry, old, name)
            m.dims = [
                f"{name}={d[len(old) + 1 :]}" if d.startswith(f"{old}=") else d for d in m.dims
            ]
        m.files[target] = new.encode("utf-8")
    elif roll < 0.8 or seed.data is None:
        mutate_flags(rng, m)
    else:
        raw = m.files.get(seed.data) or (REPO_ROOT / seed.directory / seed.data).read_bytes()
        mutate_data(rng, m, raw)
    return m


def materialise(m: Mutant, directory: Path) -> Path:
    """Write the mutant's directory: a copy of the seed's, then the mutated files."""
    shutil.copytree(REPO_ROOT / m.seed.directory, directory, dirs_exist_ok=True)
    for relative, content in m.files.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="write one fuzz mutant and print its commands")
    parser.add_argument("index", type=int)
    parser.add_argument("--out", type=Path, required=True, help="the directory to write")
    parser.add_argument("--presk", default=str(REPO_ROOT / ".venv" / "bin" / "presk"))
    args = parser.parse_args(argv)
    m = mutant(args.index)
    materialise(m, args.out)
    print(f"# mutant {m.index} ({m.seed.name}, {m.kind}): {m.description}")
    for command in m.commands:
        print(f"cd {shlex.quote(str(args.out))} && {m.shell(command, args.presk)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
