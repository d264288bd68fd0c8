"""How ``quote score`` time grows with a response's length: 0.16 M, 0.64 M and 2.56 M characters.

Usage: .venv/bin/python benchmarks/quote_score_scaling.py [--sizes 160000,640000,2560000] [--rounds 3] [--difflib]

WHY: the scorer's "partial" evidence (the longest part of a response found verbatim in the
document) used difflib, whose time is |document| x |response|: 1.9 s for 0.16 M characters and
8.6 s for 0.64 M on the issue's machine, so one 50 MB line took minutes. It now uses a suffix
automaton (quote/evidence.py). Each size is 4x the previous one, so linear time shows as a flat rate
(characters/s; the harness's ratio to the smallest size near 1), quadratic as a rate falling 4x per
size. Timed by benchmarks/_harness.py (one thread, rotated rounds, medians, load and machine). The responses are words of the item's own
document in a seeded random order: the worst case, since every word matches somewhere and the
response exists nowhere whole (category "rewritten", partial evidence computed).

The timing is the production path of one line: ``score_lines`` (JSON parsing, the size cap,
``score_response``). ``--difflib`` also times the old difflib call on the same inputs (slow).
"""

from __future__ import annotations

import difflib
import json
import random
import time

from _harness import Arm, compare, parser, report, single_thread


def response_of(words: list[str], n_chars: int, seed: int) -> str:
    rng = random.Random(seed)
    out, size = [], 0
    while size < n_chars:
        w = rng.choice(words)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n_chars]


def _arm(n: int, line: str, score_lines, got: dict) -> Arm:
    def run() -> int:
        got[n], _, _ = score_lines([line])
        return n
    return Arm(f"{n / 1e6:.2f} M chars", run)


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--sizes", default="160000,640000,2560000", help="response lengths in characters")
    ap.add_argument("--difflib", action="store_true", help="also time the old difflib evidence (slow)")
    args = ap.parse_args()
    single_thread(args.threads)

    from tamperbench.quote.items import document_for, items_by_id
    from tamperbench.quote.normalise import normalise
    from tamperbench.quote.score_file import MAX_RESPONSE_CHARS, score_lines

    item = max(items_by_id().values(), key=lambda it: (len(document_for(it).text), it.id))  # longest document
    doc = document_for(item).text
    print(f"item {item.id}: document of {len(doc):,} characters; response cap {MAX_RESPONSE_CHARS:,} characters")
    sizes = [int(s) for s in args.sizes.split(",")]
    responses = {n: response_of(doc.split(), n, seed=n) for n in sizes}
    got: dict = {}
    arms = [_arm(n, json.dumps({"item_id": item.id, "response": responses[n]}), score_lines, got) for n in sizes]
    report(compare(arms, rounds=args.rounds, warmup=False), unit="chars")
    for n in sizes:
        (v,) = got[n]
        print(f"{n / 1e6:5.2f} M chars: {v['category']}, longest match {v['evidence'].get('match_chars')} chars")
        if args.difflib:
            start = time.perf_counter()
            difflib.SequenceMatcher(None, normalise(doc), normalise(responses[n]), autojunk=False).find_longest_match()
            print(f"{'':15} difflib evidence alone: {time.perf_counter() - start:7.3f} s", flush=True)


if __name__ == "__main__":
    main()
