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
from presk.export.pytorch.naming import Naming, Table, words
from presk.export.pytorch.pskd_text import PSKD
from presk.export.pytorch.serve_text import SERVE
from presk.export.pytorch.training import constructor_call
from presk.serve.generate import Served
from presk.types.values import ServeBlock

# serve.py's own names, module level and local to `build` and `next_token` (which use the
# imported modules): a module meeting one is imported under a fresh name.
SERVE_NAMES = words(
    """
    argparse json sys time Path pskd torch HERE CONTEXT PARAMETERS fail build load encode
    parse_ids positive next_token main model theta sequence ids last window out
    """
)


def serve_files(block: ServeBlock, served: Served, names: Naming) -> dict[str, str | bytes]:
    """serve.py and its files, for the weights `served` holds (and the file they came from);
    naming.py keeps `serve` and `pskd` and the modules serve.py imports from the modules'
    names."""
    greedy = block.greedy
    if greedy is None:
        raise Unsupported(
            f"an `inference {block.name}` block without a `greedy` function "
            "(serve.py generates greedily only)"
        )
    model_file, cls, args = constructor_call(block.params.inst, served.dims, names)
    greedy_file = names.file(greedy.file)
    table = Table(SERVE_NAMES)
    modules = sorted({model_file, greedy_file})
    local = dict(zip(modules, table.assign(modules), strict=True))
    imports = "\n".join(
        sorted(
            ["import pskd", "import torch"]
            + [f"import {m}" if m == a else f"import {m} as {a}" for m, a in local.items()]
        )
    )
    table_text = "\n".join(
        f"    ({p!r}, {t!r}, {n!r})," for p, t, n in parameter_paths(block.params.inst, names)
    )
    text = SERVE.format(
        model=cls,
        source=greedy.file.basename,
        greedy=greedy.short,
        context=served.dims[block.context],
        imports=imports,
        table=table_text,
        build=f"{local[model_file]}.{cls}({args})",
        call=f"{local[greedy_file]}.{names.function(greedy)}",
    )
    return {
        "serve.py": text,
        "pskd.py": PSKD,
        "weights.psk.d": Path(served.weights_path).read_bytes(),
        "vocab.json": json.dumps(list(served.vocab.tokens), ensure_ascii=False) + "\n",
    }


__all__ = ["serve_files"]
