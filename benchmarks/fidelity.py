"""Differential fidelity: grade the honest corpus with plain Python and with agentenv, side by side.

Prints, per style, how many checks got the same verdict both ways, then every disagreement with
agentenv's failure message. The corpus and the harness live in tests/fidelity/.

    PYTHONPATH=$PWD python benchmarks/fidelity.py [STYLE ...] [--workers N] [--json PATH] [--defines]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fidelity.harness import grade_all, load_corpus, write_known


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("styles", nargs="*", help="corpus styles to grade (default: all)")
    parser.add_argument("--workers", type=int, default=3, help="programs graded at once")
    parser.add_argument("--json", help="also write the per-check outcomes here")
    parser.add_argument("--defines", action="store_true",
                        help="grade each program as a task whose reference is the program itself "
                             "(run_tests(defines=...): a check's other names are never the candidate's)")
    parser.add_argument("--write-known", action="store_true",
                        help="rewrite tests/fidelity/known_disagreements.txt from this run (all styles)")
    args = parser.parse_args()
    programs = load_corpus(args.styles or None)
    skipped = [p.ident for p in programs if not p.available()]
    start = time.perf_counter()
    outcomes = grade_all(programs, workers=args.workers, defines=args.defines)
    seconds = time.perf_counter() - start
    total: Counter[str] = Counter()
    agreed: Counter[str] = Counter()
    for o in outcomes:
        total[o.program.style] += len(o.plain)
        agreed[o.program.style] += len(o.plain) - len(o.disagreements)
    print(f"{'style':<16} {'agreed':>7} / {'total':<6} programs")
    for style in sorted(total):
        n = sum(1 for o in outcomes if o.program.style == style)
        print(f"{style:<16} {agreed[style]:>7} / {total[style]:<6} {n}")
    print(f"{'all':<16} {sum(agreed.values()):>7} / {sum(total.values()):<6} {len(outcomes)}"
          f"   ({seconds:.1f} s)")
    if skipped:
        print(f"skipped (modules missing): {', '.join(skipped)}")
    print("\ndisagreements:")
    for o in outcomes:
        for i in o.disagreements:
            why = "; ".join(m for m in o.messages if m.startswith(f"check {i}:"))
            print(f"  {o.program.ident} [{i}] python={'pass' if o.plain[i] else 'fail'} "
                  f"agentenv={'pass' if o.agentenv[i] else 'fail'}  {o.program.checks[i][:90]!r}"
                  f"\n      {why[:240]}")
    if args.write_known:
        if args.styles or args.defines:
            parser.error("--write-known records every style, without --defines")
        print(f"\nrecorded {write_known(outcomes)} honest checks still failed")
    if args.json:
        Path(args.json).write_text(json.dumps([
            {"program": o.program.ident, "plain": o.plain, "agentenv": o.agentenv,
             "messages": o.messages} for o in outcomes], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
