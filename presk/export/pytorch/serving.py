"""`--serve`: the file's `inference` block as a PyTorch program that generates text.

Beside the modules the export writes `serve.py` (the window, the greedy step, the prompt
and the tokens), `pskd.py` (the `.psk.d` reader), the weights as `weights.psk.d` and the
vocabulary as `vocab.json`. The block's sampling function draws with a key, which the
readable export cannot write yet, so it is left out of the modules (a comment says so).
"""

from __future__ import annotations

import json
from pathlib import Path

from presk.export.pytorch.conformance import parameter_paths
from presk.export.pytorch.layout import Unsupported
from presk.export.pytorch.names import ident, module_name
from presk.export.pytorch.pskd_text import PSKD
from presk.export.pytorch.serve_text import SERVE
from presk.export.pytorch.training import constructor_call
from presk.serve.generate import Served
from presk.types.values import ServeBlock

# serve.py's own modules and the ones it imports: a presk module of one of these names
# would shadow it.
TAKEN = ("serve", "pskd", "torch", "json", "sys", "time", "argparse", "pathlib")


def serve_files(block: ServeBlock, served: Served, weights_path: str) -> dict[str, str | bytes]:
    """serve.py and its files, for the weights `served` holds (read from `weights_path`)."""
    greedy = block.greedy
    if greedy is None:
        raise Unsupported(
            f"an `inference {block.name}` block without a `greedy` function "
            "(serve.py generates greedily only)"
        )
    model_file, cls, build = constructor_call(block.params.inst, served.dims)
    greedy_file = module_name(greedy.file.basename)
    clash = [m for m in (model_file, greedy_file) if m in TAKEN]
    if clash:
        raise Unsupported(f"a presk file whose module is `{clash[0]}` (serve.py imports one)")
    imports = "\n".join(f"import {m}" for m in sorted({"pskd", "torch", model_file, greedy_file}))
    table = "\n".join(
        f"    ({p!r}, {t!r}, {n!r})," for p, t, n in parameter_paths(block.params.inst)
    )
    text = SERVE.format(
        model=cls,
        source=greedy.file.basename,
        greedy=greedy.short,
        context=served.dims[block.context],
        imports=imports,
        table=table,
        build=f"{model_file}.{build}",
        call=f"{greedy_file}.{ident(greedy.short)}",
    )
    return {
        "serve.py": text,
        "pskd.py": PSKD,
        "weights.psk.d": Path(weights_path).read_bytes(),
        "vocab.json": json.dumps(list(served.vocab.tokens), ensure_ascii=False) + "\n",
    }


__all__ = ["serve_files"]
