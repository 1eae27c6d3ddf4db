"""Whole programs graded as each benchmark's judge grades them, and by agentenv, side by side.

For every layout (agentenv JSONL, APPS, LiveCodeBench, CodeContests) prints how many tests got
the same verdict both ways, how many programs pass everything under the reference, the false
passes (agentenv passes what the judge fails: must be 0), and every disagreement with its
recorded reason (a grader's flaw we do not copy) or "NEW". The corpus and the harness live in
tests/fidelity/program_corpus.py and tests/fidelity/program_harness.py.

    PYTHONPATH=$PWD python benchmarks/programs_fidelity.py [LAYOUT ...] [--slow] [--workers N] [--write-known]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fidelity.program_corpus import LAYOUTS, heavy_programs, programs
from fidelity.program_harness import grade_all, known_disagreements, write_known


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("layouts", nargs="*", choices=[*LAYOUTS, []], help="layouts (default: all)")
    parser.add_argument("--slow", action="store_true", help="also the heavy programs: timeouts and a 9.3 MB answer")
    parser.add_argument("--write-known", action="store_true",
                        help="rewrite tests/fidelity/programs_known.txt from this run (all layouts, --slow)")
    parser.add_argument("--workers", type=int, default=3, help="programs graded at once")
    args = parser.parse_args()
    wanted = set(args.layouts or LAYOUTS)
    corpus = [p for p in programs() + (heavy_programs() if args.slow else []) if p.layout in wanted]
    start = time.perf_counter()
    outcomes = grade_all(corpus, workers=args.workers)
    seconds = time.perf_counter() - start
    known = known_disagreements()
    total: Counter[str] = Counter()
    agreed: Counter[str] = Counter()
    false_passes: Counter[str] = Counter()
    honest: Counter[str] = Counter()
    honest_pass: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for o in outcomes:
        layout = o.program.layout
        count[layout] += 1
        total[layout] += len(o.plain)
        agreed[layout] += len(o.plain) - len(o.disagreements)
        false_passes[layout] += len(o.false_passes)
        if not o.program.wrong:
            honest[layout] += 1
            honest_pass[layout] += all(o.plain)
    print(f"{'layout':<15} {'agreed':>7} / {'tests':<6} {'programs':>8} {'honest passing':>15} {'false passes':>13}")
    for layout in LAYOUTS:
        if count[layout]:
            print(f"{layout:<15} {agreed[layout]:>7} / {total[layout]:<6} {count[layout]:>8} "
                  f"{honest_pass[layout]:>7} / {honest[layout]:<6} {false_passes[layout]:>13}")
    print(f"{'all':<15} {sum(agreed.values()):>7} / {sum(total.values()):<6} {len(outcomes):>8} "
          f"{sum(honest_pass.values()):>7} / {sum(honest.values()):<6} {sum(false_passes.values()):>13}"
          f"   ({seconds:.1f} s)")
    print("\ndisagreements:")
    for o in outcomes:
        for i in o.disagreements:
            key = f"{o.program.ident} {i}"
            why = known.get(key, "NEW")
            detail = "; ".join(m for m in o.messages if m.startswith(f"test {i}:"))
            print(f"  {key}  judge={'pass' if o.plain[i] else 'fail'} agentenv={'pass' if o.agentenv[i] else 'fail'}"
                  f"  [{why}]" + (f"\n      {detail[:240]}" if detail else ""))
    if args.write_known:
        if args.layouts or not args.slow:
            parser.error("--write-known records the whole corpus: give --slow and no LAYOUT")
        print(f"\nrecorded {write_known(outcomes)} disagreements")
    return 0


if __name__ == "__main__":
    sys.exit(main())
