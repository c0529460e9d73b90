"""The conformance suite: the native backend against the reference interpreter at 256 bits.

`python -m conformance.run` (or `python conformance/run.py`, `make conformance`) runs it;
see conformance/run.py for what is compared and how.
"""
