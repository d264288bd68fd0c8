"""plan_groups: which prompts share a prefill, checked against hand-counted token costs."""

from __future__ import annotations

from tamperbench.models.prefix_share import Group, common_prefix, plan_groups, prefill_cost


def _norm(groups):
    return sorted((g.prefix, sorted(g.members)) for g in groups)


def test_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([5], [6]) == 0


def test_two_documents_two_groups():
    doc_a, doc_b = list(range(100, 140)), list(range(200, 240))  # 40-token "documents"
    prompts = [doc_a + [1, 2], doc_b + [1, 2], doc_a + [3, 4, 5], doc_b + [3]]
    groups = plan_groups(prompts, min_shared=16)
    assert _norm(groups) == [(40, [0, 2]), (40, [1, 3])]
    # by hand: 40 + 2 + 3 for doc_a, 40 + 2 + 1 for doc_b; alone: 42 + 42 + 43 + 41
    assert prefill_cost(groups, prompts) == 88
    assert prefill_cost([Group(0, [0, 1, 2, 3])], prompts) == 168


def test_identical_prompts_keep_one_suffix_token():
    p = list(range(50))
    groups = plan_groups([p, p, p], min_shared=16)
    assert _norm(groups) == [(49, [0, 1, 2])]  # the last token's logits start each answer


def test_short_shared_prefix_is_not_shared():
    prompts = [[1, 2, 3, 10, 11], [1, 2, 3, 20, 21]]
    assert _norm(plan_groups(prompts, min_shared=16)) == [(0, [0]), (0, [1])]


def test_nested_prefixes_pick_the_cheaper_cut():
    # a 20-token header for all, then two 60-token documents: sharing each document beats sharing
    # only the header (20 + 4 x 61 = 264 vs 2 x (80 + 2) = 164, plus one forward's overhead each)
    head = list(range(1000, 1020))
    a, b = list(range(60)), list(range(60, 120))
    prompts = [head + a + [1], head + a + [2], head + b + [1], head + b + [2]]
    assert _norm(plan_groups(prompts, min_shared=16)) == [(80, [0, 1]), (80, [2, 3])]


def test_empty_and_single():
    assert plan_groups([]) == []
    assert _norm(plan_groups([[1, 2, 3]])) == [(0, [0])]
