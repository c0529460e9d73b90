"""`make plan-check`: a plan stating every default prints every entry's C text unchanged.

For every conformance case (each function of conformance/programs/*.psk and
each example entry of conformance/run.py), in f64, f32 and bf16, on one
worker and on two, the entry is printed as the native backend prints it,
then again under a plan whose every point states the default's own choice
(presk/tune/defaults.py), and the two C texts must be equal byte for byte.
One line per failure, then `N passed, M failed`; exit 1 on any failure.

    python conformance/plan_check.py [-k SUBSTRING] [--fast]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from conformance.run import Case, _front, all_cases  # noqa: E402

FAST = ("attend (tutorial 03)", "loss_grad (tutorial 04)", "05_contractions.")


def check(case: Case, dtype: str, threads: int) -> str | None:
    """None if the texts agree, else what differs (or why the case could not print)."""
    from presk.entries import bind_dims, find_entry
    from presk.host.realization import Realization
    from presk.pipeline import Request, run_back_end
    from presk.tune.capture import capture
    from presk.tune.defaults import defaults_plan

    checked, _ = _front(case.file, case.consts)
    entry = find_entry(checked, case.entry)
    binding = bind_dims(entry, dict(case.dims))
    request = Request(checked, entry, binding, Realization(dtype), threads)
    try:
        plain = run_back_end(request, until="print").unit
    except Exception as error:  # an entry the native backend does not run: not ours to judge
        return None if "not" in str(error) else f"cannot print: {error}"
    plan = defaults_plan(capture(request), threads)
    stated = Request(checked, entry, binding, Realization(dtype), threads, layouts=plan.layouts)
    planned = run_back_end(stated, until="print").unit
    assert plain is not None and planned is not None
    if plain.text == planned.text:
        return None
    a, b = plain.text.splitlines(), planned.text.splitlines()
    line = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    shown = b[line] if line < len(b) else "<end>"
    return f"line {line + 1} differs: {shown.strip()[:100]} ({len(plan.layouts)} nests stated)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default=None, help="only cases whose label contains this")
    parser.add_argument("--fast", action="store_true", help="the subset `make test` runs")
    args = parser.parse_args(argv)
    cases = [c for c in all_cases() if args.k is None or args.k in c.label]
    if args.fast:
        cases = [c for c in cases if any(c.label.startswith(f) for f in FAST)]
    passed = failed = 0
    for case in cases:
        for dtype in ("f64", "f32", "bf16"):
            for threads in (1, 2):
                problem = check(case, dtype, threads)
                if problem is None:
                    passed += 1
                else:
                    failed += 1
                    print(f"FAIL {case.label} {dtype} threads={threads}: {problem}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
