"""`.psk.d` data files: a typed container of samples.

`presk.data.format` reads and writes the container (the byte layout is specified in
docs/data-format.md; runtime/c/presk_data.c is the same reader and writer in C) and converts
samples to and from the reference interpreter's values. `presk.data.read` and
`presk.data.write` (presk/data/samples.py) are the Python API: samples as numpy arrays,
dicts and tuples. The `presk data` command lives in presk/commands/data.py.
"""

from presk.data.samples import Samples, read, write

__all__ = ["Samples", "read", "write"]
