"""Where the fixed C text lives: templates/c, runtime/c and libm/musl.

In a checkout (and an editable install) they sit at the repository's root; a
wheel carries them as package data in presk/_data/ (setup.py copies them
there). `PRESK_DATA` may point elsewhere.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

# A file of each tree: a directory of the same name is not enough, since in a wheel the
# first candidate is site-packages, where anything may sit.
MARKERS = ("templates/c/function.c.j2", "runtime/c/presk_rt.h", "libm/musl/presk_libm.c")


@cache
def root() -> Path:
    """The directory holding templates/, runtime/ and libm/."""
    env = os.environ.get("PRESK_DATA")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    for candidate in (here.parent, here / "_data"):
        if all((candidate / marker).is_file() for marker in MARKERS):
            return candidate
    raise FileNotFoundError("presk's C runtime was not found (set PRESK_DATA)")


def read(relative: str) -> str:
    """The text of a data file, e.g. `runtime/c/presk_rt.h`."""
    return (root() / relative).read_text(encoding="utf-8")
