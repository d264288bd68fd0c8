"""The choice read-out's arithmetic without a model: the option trie, the prefix-free closing delimiter,
the record fields (parsed by construction, token-level fields only), and the spec's refusals."""

from __future__ import annotations

import json
import math

import pytest
import torch

from tamperbench.errors import UserError
from tamperbench.owmi import choice as ch
from tamperbench.owmi.spec import parse_spec, quick_spec


class _Tok:
    """A character tokenizer (one id per character): every option of two or more characters is multi-token."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}


def test_an_option_that_prefixes_another_takes_its_closing_delimiter():
    cs = ch.ClosedSet("localization", "layer", ("1", "12", "3"), string=False)
    pre, opts = ch.tokenize(_Tok(), cs)
    assert pre == [ord(c) for c in '{"layer": ']
    # "1" is a token-level prefix of "12": it is read as "1}" so the set is prefix-free; "12" and "3" are not
    assert opts == [[ord("1"), ord("}")], [ord("1"), ord("2")], [ord("3")]]


def test_scores_sum_teacher_forced_logprobs_and_feed_each_deepest_prefix_once():
    vocab, rows = 8, 2
    torch.manual_seed(0)
    first = torch.randn(rows, vocab)
    after = {(1,): torch.randn(rows, vocab), (1, 2): torch.randn(rows, vocab), (4,): torch.randn(rows, vocab)}
    calls = []

    def branch(parents, blocks):  # logits after each fed column, per (row, block)
        calls.append((list(parents), [list(b) for b in blocks]))
        return torch.stack([torch.stack([after[tuple(b[: j + 1])][p] for j in range(len(b))]) for p, b in zip(parents, blocks)])

    options = [[1, 2, 3], [1, 5], [4, 6], [7]]
    got = ch.score_options(first, options, branch, row_bytes=1)
    lp = lambda t, r, k: float(torch.log_softmax(t[r], -1)[k])  # noqa: E731
    for r in range(rows):
        want = [lp(first, r, 1) + lp(after[(1,)], r, 2) + lp(after[(1, 2)], r, 3),
                lp(first, r, 1) + lp(after[(1,)], r, 5), lp(first, r, 4) + lp(after[(4,)], r, 6), lp(first, r, 7)]
        assert got[r].tolist() == pytest.approx(want, abs=1e-6)
    # the trie's deepest proper prefixes only: (1, 2) covers (1,); (4,) alone; the one-token option needs none
    fed = sorted((p, tuple(b)) for ps, bs in calls for p, b in zip(ps, bs))
    assert fed == [(0, (1, 2)), (0, (4,)), (1, (1, 2)), (1, (4,))]


def test_fields_are_parsed_by_construction_and_token_level_only():
    det = ch.fields(ch.closed_set("detection", 30), [math.log(0.3), math.log(0.1)])
    assert det["parse_ok"] is True and det["corrupted"] is False and det["parse_error"] is None
    assert det["choice_g"] == pytest.approx(0.75) and det["detected"] is True
    assert json.loads(det["choice_logprobs"]) == pytest.approx({"yes": math.log(0.3), "no": math.log(0.1)})
    assert "graded" not in det and "confidence" not in det  # the verbal fields stay empty (C.7)
    loc = ch.fields(ch.closed_set("localization", 4), [-3.0, -1.0, -2.0, -5.0])
    assert loc["layer_report"] == 1 and "choice_g" not in loc
    cat = ch.fields(ch.closed_set("characterization", 30), [-2.0, -1.0, -3.0, -4.0, -5.0])
    assert cat["category_report"] == ch.closed_set("characterization", 30).options[1]


def test_spec_refuses_choice_with_track_c_and_an_unknown_readout():
    base = quick_spec().model_dump(mode="json")
    with pytest.raises(UserError) as err:
        parse_spec({**base, "readout": "choice", "tracks": ["A", "C"]}, "cfg.json")
    assert str(err.value).startswith("cfg.json: readout: 'choice' reads a closed option set, and Track C")
    with pytest.raises(UserError) as err:
        parse_spec({**base, "readout": "logits"}, "cfg.json")
    assert str(err.value) == "cfg.json: readout: Input should be 'generated', 'constrained' or 'choice'"
    assert quick_spec().readout == "generated"  # the default is today's read-out, the paper's
