"""Prefix-tree prefill under cascade attention (models/prefix_tree.py) on the tiny random llama.

What must hold: (1) a prompt admitted through the tree (root once, group prefix after it, a
branch shared by two members, the member's tail after its branch) has the next-token distribution
and the greedy tokens of the same prompt prefilled alone, for every member, branch lengths
differing within one forward (the padding gap is masked and positions skip it); (2) the tokens
fed are the hand count (root once, branches once); (3) the copy path (sliding-window models and
TAMPERBENCH_SHARED_PREFIX_ATTENTION=copy) keeps the one-level prefill and its count; (4) the pure
count ``tree_prefill_tokens`` gives the same hand count.
"""

from __future__ import annotations

import pytest
import torch

from tamperbench.models.decoding import StepDecoder
from tamperbench.models.decoding import cascade as C
from tamperbench.models.prefix_groups import plan_groups
from tamperbench.models.prefix_share import PrefixAdmitter
from tamperbench.models.prefix_tree import plan_branches, root_length, tree_prefill_tokens

V = 96
ROOT, DOC_A, DOC_B = 20, 30, 25  # root shared by every group; each document after it
BR = {"a1": 18, "a2": 21, "b1": 17}  # branches shared by an item's two arms (>= MIN_SHARED = 16)
TAILS = (3, 9)  # an item's two arms after its branch (the short and the long one)
LONE = 11  # a prompt sharing nothing: prefilled alone


def _prompts() -> tuple[list[list[int]], int]:
    """Prompts of two documents after one root: per item a branch then two tails; plus one item of
    one arm only (no branch) and a lone prompt. Returns (prompts, the hand-counted tree tokens)."""
    g = torch.Generator().manual_seed(5)
    rand = lambda n: torch.randint(3, V, (n,), generator=g).tolist()  # noqa: E731
    root = rand(ROOT)
    docs = {"a": root + rand(DOC_A), "b": root + rand(DOC_B)}
    out = []
    for item, n in BR.items():
        branch = rand(n)
        out += [docs[item[0]] + branch + rand(t) for t in TAILS]
    out.append(docs["b"] + rand(6))  # a member with no branch partner
    out.append(rand(LONE))
    # hand count: root once, each document after the root, each branch once, every tail, the
    # partnerless member's part after its document, the lone prompt whole
    hand = ROOT + DOC_A + DOC_B + sum(BR.values()) + len(BR) * sum(TAILS) + 6 + LONE
    return out, hand


@pytest.fixture(scope="module")
def model():
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         initializer_range=0.3, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                         tie_word_embeddings=False)
    return tf.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()


def _alone(model, prompt: list[int], steps: int) -> tuple[torch.Tensor, list[int]]:
    dec = StepDecoder(model, eos_ids=[2], capacity=1)
    [r] = dec.add_rows([prompt])
    first = dec.pending_logprobs([r])[0].clone()
    for _ in range(steps):
        dec.step()
    return first, dec.generated(r)


def test_tree_rows_equal_each_prompt_alone(model, monkeypatch):
    monkeypatch.setenv(C.ENV, "cascade")
    prompts, hand = _prompts()
    dec = StepDecoder(model, eos_ids=[2], capacity=len(prompts))
    adm = PrefixAdmitter(dec, prompts)
    assert [(g.prefix, len(g.members)) for g in adm.groups if g.prefix] in (
        [(ROOT + DOC_A, 4), (ROOT + DOC_B, 3)], [(ROOT + DOC_B, 3), (ROOT + DOC_A, 4)])
    rows = {i: r for r, i in adm.admit(len(prompts))}
    assert adm.prefill_tokens == hand  # root once, branches once
    assert adm.prefill_tokens_alone == sum(map(len, prompts))
    first = {i: dec.pending_logprobs([rows[i]])[0].clone() for i in rows}
    for _ in range(6):
        dec.step()
    for i, q in enumerate(prompts):
        lp, toks = _alone(model, q, 6)
        assert torch.allclose(first[i], lp, atol=1e-5, rtol=0), i
        assert dec.generated(rows[i]) == toks, i
    # rows hold only their private columns (branch + tail); the document prefix is read once a step
    assert dec.cascade_rows == len(prompts) - 1 and dec.kv.groups_registered == 2


def test_copy_path_keeps_the_one_level_prefill(model, monkeypatch):
    """Without cascade attention each suffix is fed whole after its group prefix (no root, no branch)."""
    monkeypatch.setenv(C.ENV, "copy")
    prompts, _ = _prompts()
    dec = StepDecoder(model, eos_ids=[2], capacity=len(prompts))
    adm = PrefixAdmitter(dec, prompts)
    rows = {i: r for r, i in adm.admit(len(prompts))}
    one_level = sum(g.prefix + sum(len(prompts[i]) - g.prefix for i in g.members) for g in adm.groups)
    assert adm.prefill_tokens == one_level > _prompts()[1]
    for _ in range(4):
        dec.step()
    for i, q in enumerate(prompts):
        assert dec.generated(rows[i]) == _alone(model, q, 4)[1], i


def test_tree_count_by_hand():
    prompts, hand = _prompts()
    groups = plan_groups(prompts)
    assert root_length(groups, prompts) == ROOT
    assert tree_prefill_tokens(groups, prompts) == hand
    doc_a = next(g for g in groups if g.prefix == ROOT + DOC_A)
    branches = plan_branches([prompts[i] for i in doc_a.members], doc_a.prefix)
    assert sorted((b.prefix, len(b.members)) for b in branches) == [(BR["a1"], 2), (BR["a2"], 2)]
    # one sharing group, or a common start under MIN_SHARED: no root forward
    assert root_length([g for g in groups if g is doc_a], prompts) == 0
    assert root_length(groups, [q[:1] + [0] + q[2:] if k in doc_a.members else q for k, q in enumerate(prompts)]) == 0


def test_prefill_attention_equals_sdpa_over_each_rows_whole_keys():
    """The split softmax of decoding/cascade_prefill.py against torch's SDPA over each row's prefix
    followed by its private columns (two groups, prefixes of different lengths, branches of
    different lengths, a row without one), masked as the row sees them."""
    from types import SimpleNamespace

    from tamperbench.models.decoding.cascade_prefill import PrefillStep, prefill_attention, private_mask

    g = torch.Generator().manual_seed(7)
    m, H, kvh, L, d, S = 5, 6, 2, 4, 8, 3
    branch = [3, 0, 2, 1, 0]
    heads = [C.SharedPrefix([(torch.randn(1, kvh, n, d, generator=g), torch.randn(1, kvh, n, d, generator=g))])
             for n in (7, 4)]
    rows = [[0, 2, 3], [1, 4]]
    q = torch.randn(m, H, L, d, generator=g)
    k, v = torch.randn(m, kvh, S + L, d, generator=g), torch.randn(m, kvh, S + L, d, generator=g)
    mask = private_mask(branch, [L] * m, S, L, "cpu")
    step = PrefillStep([(torch.tensor(r), h) for r, h in zip(rows, heads)], mask)
    out = prefill_attention(SimpleNamespace(layer_idx=0), q, k, v, None, prefill_step=step)[0]
    assert out.shape == (m, L, H, d) and step.calls == 1
    for gi, members in enumerate(rows):
        pk, pv = heads[gi].kv[0]
        for r in members:
            keys = torch.cat([pk[0], k[r]], 1).repeat_interleave(H // kvh, 0)  # (H, n, d): head h reads kv h // g
            vals = torch.cat([pv[0], v[r]], 1).repeat_interleave(H // kvh, 0)
            # by hand: every prefix column; the branch's last branch[r] columns; tail columns up to the query's
            see = torch.zeros(L, pk.shape[2] + S + L, dtype=torch.bool)
            see[:, : pk.shape[2]] = True
            for t in range(L):
                see[t, pk.shape[2] + S - branch[r]: pk.shape[2] + S + t + 1] = True
            ref = torch.nn.functional.scaled_dot_product_attention(q[r], keys, vals, attn_mask=see)
            assert torch.allclose(out[r].transpose(0, 1), ref, atol=1e-5, rtol=0), r


def test_import_many_equals_importing_one_by_one(model):
    """StepDecoder.import_many (what the tree admits with) places rows as import_rows one at a time
    does: the same slots (a dead slot first, then growth), columns, masks, positions and tokens."""
    g = torch.Generator().manual_seed(9)
    src = StepDecoder(model, eos_ids=[2], capacity=4)
    rids = src.add_rows([torch.randint(3, V, (n,), generator=g).tolist() for n in (12, 5, 8)])
    src.step()
    snaps = [src.export_row(r) for r in (rids[0], rids[2], rids[1])]  # widths 13, 9, 6

    def fresh():
        dec = StepDecoder(model, eos_ids=[2], capacity=6)
        a, b = dec.add_rows([[5, 6, 7], [8, 9]])
        dec.release([a])  # a dead slot to fill first
        return dec

    one, many = fresh(), fresh()
    r_one = [one.import_rows(s, 1)[0] for s in snaps]
    r_many = many.import_many(snaps)
    assert [one.by_id[r] for r in r_one] == [many.by_id[r] for r in r_many] == [0, 2, 3]
    assert one.n == many.n and torch.equal(one.kv.mask[:4, :one.n], many.kv.mask[:4, :many.n])
    assert torch.equal(one.kv.pos[:4], many.kv.pos[:4])
    for la, lb in zip(one.kv.layers, many.kv.layers):
        assert torch.equal(la.keys, lb.keys) and torch.equal(la.values, lb.values)
    for _ in range(4):
        one.step()
        many.step()
    assert [one.generated(r) for r in r_one] == [many.generated(r) for r in r_many]
