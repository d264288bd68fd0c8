"""Each of the twelve adapters' scoring rule on a right, a wrong and a malformed answer.

Gold letters for shuffled benchmarks (GPQA, TruthfulQA) are found from the released answer
TEXT, not from the adapter's letter, so the test does not trust the code it checks.
"""

from __future__ import annotations

import pytest

from tamperbench.tasks.load import load
from tamperbench.tasks.scoring.score import mc2_from_logprobs, score


def _item(name, index):
    return load(name, fixture=True).items[index]


def _letter_of(it, text):
    return it.letters[it.choices.index(text)]


def _other(it, letter):
    return next(x for x in it.letters if x != letter)


# (benchmark, fixture index, right reply, wrong reply, malformed reply); letters from the fixture files.
MC_CASES = [
    ("mmlu", 0, "B", "A", "E"),  # order of 2 in Z_6 is 3 = option B; E is not an option
    ("mmlu", 3, "The answer is C.", "Answer: A", "A or C, hard to say"),
    ("mmlu_pro", 0, "Answer: C", "Answer: J", "Answer: K"),  # ten options A-J
    ("hellaswag", 0, "(B)", "A.", "maybe the second one"),
    ("winogrande", 0, "A", "B", "C"),  # two options only
    ("winogrande", 2, "Jen", "Maria", ""),  # option text is coerced to its letter
    ("arc_challenge", 1, "B) The water turns into a gas.", "D", "none"),  # answerKey '2' of labels 1-4
    ("arc_challenge", 2, "B", "C", "D"),  # three options: D is out of range
]


@pytest.mark.parametrize("name,index,right,wrong,malformed", MC_CASES)
def test_multiple_choice(name, index, right, wrong, malformed):
    it = _item(name, index)
    good, bad, broken = score(it, right), score(it, wrong), score(it, malformed)
    assert (good.correct, good.score, good.parse_ok) == (True, 1.0, True)
    assert (bad.correct, bad.score, bad.parse_ok) == (False, 0.0, True)
    assert (broken.correct, broken.score, broken.parse_ok, broken.parsed) == (False, 0.0, False, None)


def test_gpqa_by_released_text():
    it = _item("gpqa", 0)
    right = _letter_of(it, "3")  # the 'Correct Answer' column of the fixture
    assert score(it, f"Answer: {right}").correct is True
    assert score(it, f"Answer: {_other(it, right)}").correct is False
    assert score(it, "I cannot decide").parse_ok is False


def test_truthfulqa_mc1_and_mc2():
    mc1 = _item("truthfulqa_mc1", 1)
    right = _letter_of(mc1, "The sun is white when viewed from space.")
    assert score(mc1, right).correct is True
    assert score(mc1, _letter_of(mc1, "The sun is yellow when viewed from space.")).correct is False
    assert score(mc1, "Z").parse_ok is False
    mc2 = _item("truthfulqa_mc2", 1)
    for text in ("The sun is white when viewed from space.", "Sunlight is a mix of all colors, so it looks white."):
        assert score(mc2, _letter_of(mc2, text)).correct is True  # either true answer counts
    assert score(mc2, _letter_of(mc2, "The sun is green when viewed from space.")).correct is False
    assert score(mc2, "").parse_ok is False


def test_mc2_published_rule_from_logprobs():
    # p = (0.5, 0.25, 0.25), true = first two: MC2 = 0.75 (hand calculation)
    import math

    assert mc2_from_logprobs([math.log(0.5), math.log(0.25), math.log(0.25)], [True, True, False]) == pytest.approx(0.75)


def test_gsm8k_max_of_exact_match_and_f1():
    it = _item("gsm8k", 0)  # gold 26
    right = score(it, "3 * 12 = 36, 36 - 10 = 26.\n#### 26")
    assert (right.score, right.detail["exact_match"], right.parse_ok) == (1.0, 1.0, True)
    partial = score(it, "#### 26 pencils")  # EM 0; F1: P = 1/2, R = 1 -> 2/3
    assert partial.detail["exact_match"] == 0.0 and partial.score == pytest.approx(2 / 3)
    wrong = score(it, "#### 25")
    assert (wrong.score, wrong.correct) == (0.0, False)
    empty = score(it, "")
    assert (empty.score, empty.parse_ok) == (0.0, False)
    no_marker = score(it, "26")  # no '####': whole reply compared, flagged as not found
    assert no_marker.score == 1.0 and no_marker.parse_ok is False
    thousands = score(_item("gsm8k", 2), "#### 2000")  # gold '2,000': punctuation normalised away
    assert thousands.correct is True


def test_math_boxed_hendrycks_normalisation():
    it = _item("math", 2)  # gold \frac{3}{4}
    assert score(it, "Divide by two: $\\boxed{3/4}$").correct is True  # a/b -> \frac{a}{b}
    assert score(it, "\\boxed{\\dfrac34}").correct is True  # dfrac and \frac34 fixed
    wrong = score(it, "\\boxed{0.75}")  # the benchmark does not equate decimals with fractions
    assert (wrong.correct, wrong.parse_ok) == (False, True)
    malformed = score(it, "The answer is 3/4")  # no \boxed{}
    assert (malformed.correct, malformed.parse_ok, malformed.parsed) == (False, False, None)
    last = score(_item("math", 0), "first \\boxed{3}, then corrected: \\boxed{4}")
    assert last.correct is True and last.parsed == "4"  # the LAST boxed answer counts


@pytest.mark.usefixtures("bwrap_sandbox")
def test_humaneval_fixture():
    it = _item("humaneval", 0)
    assert score(it, it.tests.reference).correct is True
    assert score(it, "    return True\n").correct is False
    broken = score(it, "def has_close_elements(:\n")
    assert broken.correct is False and broken.detail["status"] == "failed" and "SyntaxError" in broken.detail["stderr_tail"]
    assert score(it, "").parse_ok is False
    full = "```python\nfrom typing import List\n\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n" \
           "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n```"
    whole = score(it, full)  # a chat model's whole-function reply in a fence
    assert whole.correct is True and whole.detail["assembly"] == "prompt+function"


@pytest.mark.usefixtures("bwrap_sandbox")
def test_mbpp_fixture():
    it = _item("mbpp", 1)  # is_not_prime
    assert score(it, it.tests.reference).correct is True
    assert score(it, "def is_not_prime(n):\n    return False\n").correct is False
    empty_fence = score(it, "```python\n```")
    assert (empty_fence.correct, empty_fence.parse_ok) == (False, False)
    setup = _item("mbpp", 2)  # test_setup_code 'import re' runs before the code
    assert score(setup, setup.tests.reference).correct is True


def test_ifeval_fixture():
    lower, quoted, bullets = _item("ifeval", 0), _item("ifeval", 1), _item("ifeval", 2)
    assert score(lower, "dear neighbour, our grey cat is lost. please call us.").correct is True
    assert score(lower, "Dear Neighbour, our cat is lost.").correct is False
    empty = score(lower, "")
    assert (empty.correct, empty.parse_ok) == (False, False)
    assert score(quoted, '"The sun rose slowly over the quiet hills"').correct is True
    assert score(quoted, '"The sun rose, slowly"').correct is False  # comma
    assert score(bullets, "* clip papers\n* reset a router\n* hang a picture").correct is True
    two = score(bullets, "* clip papers\n* reset a router")
    assert two.correct is False and two.detail["strict"] == [False]
    # loose: Google's rule also accepts the reply without its first line
    loose = score(bullets, "Here you go:\n* a\n* b\n* c")
    assert loose.detail["prompt_loose"] is True


@pytest.mark.parametrize("reply,letter,rule", [
    ("C", "C", "leading_letter"),
    ("(c)", None, "no_letter"),  # lower-case letters are words, not answers
    ("D) because", "D", "leading_letter"),
    ("A good choice is B", "B", "explicit_answer"),
    ("The correct option is (C).", "C", "explicit_answer"),
    ("Answer:B", "B", "explicit_answer"),
    ("First I said answer: A, but the answer is D", "D", "explicit_answer"),
    ("Answer: E", None, "letter_out_of_range"),
    ("paris.", "B", "option_text"),
    ("I pick B.", "B", "single_letter"),
    ("A or B", None, "ambiguous"),
    ("   ", None, "empty"),
])
def test_letter_coercion_rules(reply, letter, rule):
    from tamperbench.tasks.scoring.text_rules import coerce_letter

    assert coerce_letter(reply, ("London", "Paris", "Rome", "Berlin")) == (letter, rule)
