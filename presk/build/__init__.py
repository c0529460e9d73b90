"""Native build: compile one C translation unit into a cached shared object and load it.

`presk.build.compile.build(c_text)` returns the path of a `unit.so` in the
content-addressed cache (`cache_dir()`), compiling with `$PRESK_CC` (else `cc`) and
`FLAGS` on a miss; `presk.build.load.load(path, cdef)` opens it through cffi once per
process, and `presk.build.load.pointer` passes numpy arrays to it without copying. See
the two modules' docstrings for the invariants.

Nothing is re-exported here on purpose: a re-exported `load` function would shadow the
`presk.build.load` module, so `from presk.build import load` would mean two things.
Import from the submodules.
"""
