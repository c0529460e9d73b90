"""Regularity classes and per-argument dependencies.

Every checked value carries `Deps`: for each argument of the enclosing
function it depends on, the worst regularity class of that dependence and,
when it is Disc, the primitive to blame (for E3001). Classes compose by
taking the worst: a C∞ function of a C⁰⁺ function is C⁰⁺.
"""

from __future__ import annotations

from enum import IntEnum

from presk.diagnostics import Span


class Reg(IntEnum):
    """Regularity classes, ordered from smoothest to worst."""

    SMOOTH = 0
    LIPSCHITZ = 1
    DISC = 2

    def __str__(self) -> str:
        return ("C∞", "C⁰⁺", "Disc")[self.value]


# The primitive and the span that made a dependence discontinuous.
Blame = tuple[str, Span]
Deps = dict[str, tuple[Reg, Blame | None]]


def merge(*all_deps: Deps) -> Deps:
    """The dependencies of a value computed from several values: worst class per argument."""
    out: Deps = {}
    for deps in all_deps:
        for name, (reg, blame) in deps.items():
            if name not in out or reg > out[name][0]:
                out[name] = (reg, blame)
    return out


def at_least(deps: Deps, reg: Reg, blame: Blame | None) -> Deps:
    """Compose with a primitive of class `reg`; `blame` names it when it is Disc."""
    out: Deps = {}
    for name, (old, old_blame) in deps.items():
        if reg > old:
            out[name] = (reg, blame if reg == Reg.DISC else old_blame)
        else:
            out[name] = (old, old_blame)
    return out


def through(
    callee: dict[str, tuple[Reg, Blame | None]], args: list[Deps], depends: set[str]
) -> Deps:
    """Dependencies of a call's result: argument i's deps composed with the callee's class in i.

    Arguments the callee's result does not depend on (`depends`) contribute nothing.
    """
    parts: list[Deps] = []
    for (name, (reg, blame)), deps in zip(callee.items(), args, strict=True):
        if name in depends:
            parts.append(at_least(deps, reg, blame))
    return merge(*parts)
