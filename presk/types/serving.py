"""`inference serve { … }`: a model, its weights, a vocabulary and its generation functions.

    inference serve {
      model    = gpt.MiniGPT
      weights  = "ckpt/final.psk.d"
      vocab    = "data/vocab.json"
      generate = next_token          -- (θ, ids, last, key, temperature) -> idx[V][batch: B]
      greedy   = greedy_token        -- (θ, ids, last) -> idx[V][batch: B]; optional
    }

`ids` is a window of the context, `idx[V][batch: B, seq: T]`, and `last` the position of
each sequence's last token in it, `idx[T][batch: B]`: a prompt shorter than the context
is padded after its end, which a causal model never reads, so the window gives the
scores an unpadded sequence would. A malformed block is E2019; the files are opened by
`presk serve` and `check --summary`, not by the checker.
"""

from __future__ import annotations

import os

from presk.elab.presburger import Lin
from presk.elab.program import FileEnv
from presk.elab.ty import SCALAR, Elem, KeyT, Params, Tensor, Type
from presk.syntax import ast
from presk.types.training import BlockError, block_fields, function_named, module_named
from presk.types.values import FnInfo, ServeBlock

FIELDS = ("model", "weights", "vocab", "generate", "greedy")


def _path(file: FileEnv, field: ast.Field) -> str:
    if not isinstance(field.value, ast.Str):
        raise BlockError(
            "E2019",
            f"`{field.name.name}` is a file name in quotes",
            field.value.span,
            "not a string",
        )
    return os.path.normpath(os.path.join(os.path.dirname(file.path), field.value.value))


def _axes(ty: Type, names: tuple[str, ...]) -> tuple[Lin, ...] | None:
    """The sizes of an index tensor whose axes are exactly `names`, else None."""
    if isinstance(ty, Tensor) and ty.elem == Elem.IDX and not ty.open:
        if tuple(a.name for a in ty.axes) == names:
            return tuple(a.size for a in ty.axes)
    return None


def _var(size: Lin) -> str | None:
    if not size.is_const and size.const == 0 and len(size.coeffs) == 1 and size.coeffs[0][1] == 1:
        return size.coeffs[0][0]
    return None


def _signature(info: FnInfo, model: object, greedy: bool) -> tuple[str, str, Lin]:
    """(batch dim, context dim, V) when `info` has a generation function's signature."""
    wanted = (
        "(θ : params M, ids : idx[V][batch: B, seq: T], last : idx[T][batch: B]"
        + (")" if greedy else ", key : key, temperature : ℝ[])")
        + " -> idx[V][batch: B]"
    )
    types = [t for _, t, _ in info.params]
    problem = BlockError(
        "E2019",
        f"`{info.name}` is not a generation function: it should be {wanted}",
        info.decl.name.span if info.decl is not None else info.file.tree.span,
        f"`{info.name}` takes ({', '.join(str(t) for t in types)}) -> {info.ret}",
    )
    if len(types) != (3 if greedy else 5):
        raise problem
    theta, ids, last = types[:3]
    if not (isinstance(theta, Params) and theta.inst.module is model):
        raise problem
    window = _axes(ids, ("batch", "seq"))
    where = _axes(last, ("batch",))
    out = _axes(info.ret, ("batch",)) if info.ret is not None else None
    if window is None or where is None or out is None:
        raise problem
    b, t = _var(window[0]), _var(window[1])
    assert isinstance(ids, Tensor) and isinstance(last, Tensor) and isinstance(info.ret, Tensor)
    if b is None or t is None or where[0] != window[0] or out[0] != window[0]:
        raise problem
    if ids.bound is None or info.ret.bound != ids.bound or last.bound != window[1]:
        raise problem
    if not greedy and not (isinstance(types[3], KeyT) and types[4] == SCALAR):
        raise problem
    return b, t, ids.bound


def check_serve(file: FileEnv, block: ast.Inference, functions: list[FnInfo]) -> ServeBlock:
    """One `inference` block, checked (E2019)."""
    required = ("model", "weights", "vocab", "generate")
    fields = block_fields(block.fields, FIELDS, required, block.name, "E2019", "an inference block")
    model, model_text = module_named(file, fields["model"].value)
    generate = function_named(file, fields["generate"].value, functions, "E2019")
    batch, context, classes = _signature(generate, model, greedy=False)
    greedy = None
    if "greedy" in fields:
        greedy = function_named(file, fields["greedy"].value, functions, "E2019")
        if _signature(greedy, model, greedy=True) != (batch, context, classes):
            raise BlockError(
                "E2019",
                f"`{greedy.name}` and `{generate.name}` disagree on the window",
                fields["greedy"].value.span,
                "another batch, context or vocabulary",
            )
    params = generate.params[0][1]
    assert isinstance(params, Params)
    return ServeBlock(
        block.name.name,
        model_text.split(".")[-1],
        params,
        generate,
        greedy,
        _path(file, fields["weights"]),
        _path(file, fields["vocab"]),
        batch,
        context,
        classes,
    )
