"""plan_groups: which prompts share a prefill, checked against hand-counted token costs."""

from __future__ import annotations

from tamperbench.models.prefix_groups import Group, common_prefix, plan_groups, prefill_cost, split_by_length


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


def test_suffixes_split_by_length_by_hand():
    # a document's plain (~30 tokens) and strict (~65) suffixes: one forward pads to 66,
    # 8 x 66 + 16 = 544 token equivalents; two forwards 4 x 31 + 16 + 4 x 66 + 16 = 420;
    # three (29-30 | 31 | 64-66) 3 x 30 + 16 + 31 + 16 + 4 x 66 + 16 = 433
    lens = [30, 65, 31, 66, 29, 64, 30, 65]
    assert split_by_length(lens, prefix=340, overhead=16) == [[4, 0, 6, 2], [5, 1, 7, 3]]
    # equal lengths: one forward (any split only adds overhead)
    assert split_by_length([40, 40, 40], prefix=340, overhead=16) == [[0, 1, 2]]


def test_suffix_forwards_stay_within_their_columns():
    parts = split_by_length([10, 10, 10], prefix=100, overhead=16, max_columns=230)
    assert sorted(map(len, parts)) == [1, 2]  # 3 x 110 columns > 230 >= 2 x 110
    assert sorted(i for part in parts for i in part) == [0, 1, 2]
    assert split_by_length([500], prefix=100, max_columns=200) == [[0]]  # one row always goes
    assert split_by_length([], prefix=10) == []


def _kv(n: int, layers: int = 2):
    import torch

    return [(torch.arange(n, dtype=torch.float32).view(1, 1, n, 1), -torch.arange(n, dtype=torch.float32).view(1, 1, n, 1))
            for _ in range(layers)]


def test_prefix_store_finds_the_longest_shared_row():
    from tamperbench.models.prefix_share import PrefixStore

    store = PrefixStore(max_bytes=10**6)
    a, b, c = [5, 6, 7, 8, 9], [5, 6, 1, 2], [9, 9, 9]
    for ids in (a, b, c):
        assert store.remember(ids, _kv(len(ids)))
    assert store.best([5, 6, 7, 8, 9, 10, 11]) == (5, store.ids.index(a))  # a retry extends row a
    assert store.best([5, 6, 1, 3])[0] == 3  # shares 5 6 1 with b
    assert store.best([4])[0] == 0
    assert PrefixStore(max_bytes=10**6).best([1, 2]) == (0, -1)


def test_prefix_store_bounds_its_bytes_and_checks_lengths():
    from tamperbench.models.prefix_share import PrefixStore

    # 2 layers x (keys + values) x 10 columns x 4 bytes = 160 bytes a 10-token row
    store = PrefixStore(max_bytes=320)
    assert store.remember(list(range(10)), _kv(10)) and store.bytes == 160
    assert not store.remember(list(range(9)), _kv(10))  # KV columns must match the ids
    assert store.remember(list(range(1, 11)), _kv(10)) and store.bytes == 320
    assert not store.remember(list(range(2, 12)), _kv(10))  # over the budget: not kept
    assert len(store.ids) == 2


def test_stored_groups_cut_to_the_shortest_hit():
    from tamperbench.models.prefix_groups import MIN_SHARED
    from tamperbench.models.prefix_share import PrefixStore, _stored_groups

    row = list(range(100, 140))  # a 40-token first conversation
    store = PrefixStore(max_bytes=10**6)
    store.remember(row, _kv(40))
    prompts = [row + [1, 2, 3], row[:30] + [7, 7], [1, 2, 3], row]  # the last: only 39 may be reused
    groups, rest = _stored_groups(store, prompts, MIN_SHARED)
    assert rest == [2]
    [(g, kv)] = groups
    assert g.members == [0, 1, 3] and g.prefix == 30  # min(40, 30, 40 - 1)
    assert kv[0][0].shape[-2] == 30 and kv[0][0].flatten().tolist() == list(range(30))
