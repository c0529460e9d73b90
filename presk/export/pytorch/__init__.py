"""`presk export --target pytorch --mode readable`: the program as PyTorch modules.

files.py writes one Python file per presk file from the checked program (the AST for
each module's parameters and sub-modules, each function's PSK-Core for its body, typed
at every step so that named axes become positions: layout.py, prims.py, body.py);
conformance.py writes the test that compares the export with the reference.
"""
