"""The choice read-out's arithmetic without a model: the option trie, the closing delimiter on every
option, the summed variants, the record fields (token-level fields only, the option mass and its
threshold), the active scope's label, the lifted default and the spec's refusals."""

from __future__ import annotations

import json
import math

import pytest
import torch

from tamperbench.errors import UserError
from tamperbench.owmi.engine import choice as ch
from tamperbench.owmi.run.spec import parse_spec, quick_spec


class _Tok:
    """A character tokenizer (one id per character): every option of two or more characters is multi-token."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}


def test_every_option_takes_its_closing_delimiter():
    cs = ch.ClosedSet("localization", "layer", ("1", "12", "3"), string=False)
    tk = ch.tokenize(_Tok(), cs)
    assert tk.prefix == [ord(c) for c in '{"layer": ']
    # every layer is closed the same way: "1}" (which "12" would otherwise extend) and "3}" alike
    closed = [[ord(c) for c in t] for t in ("1}", " 1}", "12}", " 12}", "3}", " 3}")]
    assert tk.seqs == closed and tk.owner == [0, 0, 1, 1, 2, 2]
    # a string is closed only where it would prefix another option: BPE tokenizers merge the closing quote
    # with what follows (SmolLM2: yes + '",'), so a lone '"' token carries little probability and closing
    # every string made a model fine-tuned to answer "yes" unscorable
    det = ch.tokenize(_Tok(), ch.closed_set("detection", 30))
    assert all(seq[-1] != ord('"') for seq in det.seqs)
    words = ch.tokenize(_Tok(), ch.ClosedSet("characterization", "category", ("yes", "yesterday", "no"), string=True))
    by_text = {"".join(chr(c) for c in seq): words.owner[i] for i, seq in enumerate(words.seqs)}
    assert by_text['yes"'] == 0 and by_text["yesterday"] == 1 and by_text["no"] == 2 and "yes" not in by_text


def test_case_and_leading_space_variants_are_summed():
    cs = ch.closed_set("detection", 30)
    assert cs.variants("yes") == ("yes", " yes", "Yes", " Yes", "YES", " YES")
    assert cs.variants("yes", closed=True) == ('yes"', ' yes"', 'Yes"', ' Yes"', 'YES"', ' YES"')
    tk = ch.tokenize(_Tok(), cs)
    assert [cs.options[k] for k in tk.owner] == ["yes"] * 6 + ["no"] * 6
    seq = torch.log(torch.tensor([[0.1, 0.05, 0.2, 0.0, 0.0, 0.05] + [0.3, 0.0, 0.1, 0.0, 0.0, 0.0]]))
    got = ch.option_scores(seq, tk.owner, 2)
    assert got[0].exp().tolist() == pytest.approx([0.4, 0.4])


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


def test_fields_are_token_level_only_and_record_the_option_mass():
    det = ch.fields(ch.closed_set("detection", 30), [math.log(0.45), math.log(0.15)])
    assert det["parse_ok"] is True and det["parse_error"] is None and det["choice_scorable"] is True
    assert det["corrupted"] is None  # nothing decoded: corruption is not measurable, not "none"
    assert det["choice_mass"] == pytest.approx(0.6)
    assert det["choice_g"] == pytest.approx(0.75) and det["detected"] is True
    assert json.loads(det["choice_logprobs"]) == pytest.approx({"yes": math.log(0.45), "no": math.log(0.15)})
    assert "graded" not in det and "confidence" not in det  # the verbal fields stay empty (C.7)
    loc = ch.fields(ch.closed_set("localization", 4), [-3.0, -0.2, -2.0, -5.0])
    assert loc["layer_report"] == 1 and "choice_g" not in loc
    cat = ch.fields(ch.closed_set("characterization", 30), [-2.0, -0.1, -3.0, -4.0, -5.0])
    assert cat["category_report"] == ch.closed_set("characterization", 30).options[1]


def test_a_row_under_the_option_mass_threshold_is_unscorable():
    low = ch.MIN_OPTION_MASS * 0.9
    det = ch.fields(ch.closed_set("detection", 30), [math.log(low * 0.7), math.log(low * 0.3)])
    assert det["choice_mass"] == pytest.approx(low) and det["choice_scorable"] is False and det["parse_ok"] is False
    assert "MIN_OPTION_MASS" in det["parse_error"] and "unscorable" in det["parse_error"]


def test_active_scope_choice_is_labelled_first_order_leakage_and_lifted_is_the_default():
    cs = ch.closed_set("detection", 30)
    assert cs.detail("active")["label"] == ch.ACTIVE_LABEL == "first-order leakage"
    assert "label" not in cs.detail("lifted") and "label" not in cs.detail(None)
    assert quick_spec(readout="choice").scopes == ("lifted",)
    assert quick_spec(readout="choice", scopes=["active", "lifted"]).scopes == ("active", "lifted")
    assert quick_spec().scopes == ("active", "lifted")  # the generated read-out keeps both


def test_corruption_under_choice_reads_not_measurable():
    from tamperbench.owmi.score.damage import corruption

    rows = [{"condition": c, "observer_tier": None, "pair_id": f"p{i}", "item_id": f"i{i}", "parse_ok": True,
             "detected": True, "graded": 0.5, "corrupted": None} for i in range(3) for c in ("intervention", "sham")]
    assert corruption(rows, 10, 0)["without_corrupted"].startswith("not measurable")


def test_spec_refuses_choice_with_track_c_and_an_unknown_readout():
    base = quick_spec().model_dump(mode="json")
    with pytest.raises(UserError) as err:
        parse_spec({**base, "readout": "choice", "tracks": ["A", "C"]}, "cfg.json")
    assert str(err.value).startswith("cfg.json: readout: 'choice' reads a closed option set, and Track C")
    with pytest.raises(UserError) as err:
        parse_spec({**base, "readout": "logits"}, "cfg.json")
    assert str(err.value) == "cfg.json: readout: Input should be 'generated', 'constrained' or 'choice'"
    assert quick_spec().readout == "generated"  # the default is today's read-out, the paper's


def test_packed_tries_score_what_the_cache_copies_score():
    """score_rows (a packed forward per distinct trie) against score_options (one forward per prefix
    length on copied caches), on a fake model whose next-token logits depend on the whole prefix fed."""
    vocab = 9
    gen = torch.Generator().manual_seed(1)
    table: dict[tuple, torch.Tensor] = {}

    def logits_after(row: int, prefix: tuple) -> torch.Tensor:
        if (row, prefix) not in table:
            table[(row, prefix)] = torch.randn(vocab, generator=gen)
        return table[(row, prefix)]

    per_row = [[[1, 2, 3], [1, 5], [4]], [[7, 8], [7, 6, 2, 2], [3, 3]], [[1, 2, 3], [1, 5], [4]]]
    first = torch.stack([logits_after(r, ()) for r in range(3)])
    packed_calls = []

    def tree(rows, nodes):
        packed_calls.append((list(rows), [len(n) for n in nodes]))
        w = max(len(n) for n in nodes)
        out = torch.zeros(len(nodes), w, vocab)
        for r, ns in zip(rows, nodes):
            i = rows.index(r)
            for j in range(len(ns)):  # the node's prefix: its ancestors' tokens, then its own
                path, k = [], j
                while k >= 0:
                    path.append(ns[k][0])
                    k = ns[k][1]
                out[i, w - len(ns) + j] = logits_after(r, tuple(reversed(path)))
        return out

    got = ch.score_rows(first, per_row, tree, vocab)
    # one forward per distinct trie, on the rows reading it alone: rows 0 and 2 share theirs, and no row is
    # padded to another trie's width
    assert packed_calls == [([0, 2], [2, 2]), ([1], [4])]
    for r, seqs in enumerate(per_row):
        def branch(parents, blocks, r=r):
            return torch.stack([torch.stack([logits_after(r, tuple(b[: j + 1])) for j in range(len(b))])
                                for b in blocks])
        want = ch.score_options(first[r: r + 1], seqs, branch, row_bytes=1)[0]
        assert got[r].tolist() == pytest.approx(want.tolist(), abs=1e-6)
