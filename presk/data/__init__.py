"""`.psk.d` data files: a typed container of samples, and the `presk data` command.

`presk.data.format` reads and writes the container (the byte layout is specified in
docs/data-format.md; runtime/c/presk_data.c is the same reader and writer in C) and converts
samples to and from the reference interpreter's values. `presk.data.command` is the body of
`presk data pack|info|diff`.
"""
