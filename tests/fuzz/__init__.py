"""The generator of tests/test_fuzz_commands.py: mutants of programs, flags and data files."""
