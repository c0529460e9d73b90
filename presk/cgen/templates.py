"""The Jinja environment of templates/c/: layout only, every piece of text computed in Python."""

from __future__ import annotations

from functools import cache

import jinja2

from presk import resources


@cache
def env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resources.root() / "templates" / "c")),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
