"""The reference's side of running an entry: its interpreter and its inputs.

`reference_interpreter(module)` is the exact interpreter with `M.init(key)`
wired to the initializers; `reference_inputs(info, binding, seed)` draws the
inputs every backend runs on (docs/rng.md).
"""

from __future__ import annotations

from presk.core import ir
from presk.elab.ty import Params, Type, dims_env, subst
from presk.interp import rng
from presk.interp.reference import Interpreter, Tree, Value
from presk.interp.synth import init_from_key, synthesize
from presk.interp.tensor import Axis
from presk.types.check import FnInfo


def reference_interpreter(module: ir.Module) -> Interpreter:
    """The exact interpreter of a differentiated module."""
    interp = Interpreter(module)

    def init_hook(ty: Type, at: dict[str, int], key: rng.Key) -> Tree:
        assert isinstance(ty, Params)
        env = dims_env(at)
        inst = subst(ty, env)
        assert isinstance(inst, Params)
        return init_from_key(inst.inst, at, key)

    interp.init_hook = init_hook
    return interp


def reference_inputs(
    info: FnInfo, dims: dict[str, int], prefix: tuple[Axis, ...] | None, seed: int
) -> list[Value]:
    """The entry's arguments as `presk run` synthesizes them: θ from its initializers
    (path `theta`), every other argument from the key of `input/<name>`."""
    env = dims_env(dims)
    return [
        synthesize(
            subst(ty, env),
            name,
            "theta" if isinstance(ty, Params) else f"input/{name}",
            dims,
            prefix,
            seed,
            default,
        )
        for name, ty, default in info.params
    ]
