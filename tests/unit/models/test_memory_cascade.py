"""The batch-size rule of models/memory.py under cascade attention, against hand-computed bytes.

With cascade attention (models/decoding/cascade.py) a row holds only its private columns (its
prompt after the group's shared prefix, plus new tokens) and the shared prefixes are held once.
Same model shape as tests/unit/models/test_memory_rule.py (SmolLM2-135M's dims, float32).
"""

from __future__ import annotations

from tamperbench.models import memory as M


def test_footprint_with_private_rows_by_hand(smollm2_shape):
    # 10 rows of 3,220-token prompts sharing a 3,120-token prefix: 100 private prompt tokens + 8 new
    #   KV a row 46,080 x ((4 x 108) // 3 + 80 = 224) = 10,321,920; x 10 = 103,219,200, plus 1.5 rows
    #   / 30 layers = 5,160,960
    #   distributions 15,728,640 and the prefill forward 2,339,330,000, as without cascade
    #   the shared prefixes once: 46,080 x 3,220 (max of the prompt and the prefixes' 3,120) = 148,377,600
    #   the prefix scores: 12 B x 10 rows x 9 heads x 3,220 columns = 3,477,600
    expect = 103_219_200 + 5_160_960 + 15_728_640 + 2_339_330_000 + 148_377_600 + 3_477_600
    assert expect == 2_615_294_000
    got = M.footprint(smollm2_shape, 10, prompt_len=3220, new_tokens=8, private_len=100, shared_tokens=3120)
    assert got == expect
    # two groups of 3,000-token prefixes, both live: 6,000 shared tokens held once
    two = M.footprint(smollm2_shape, 10, prompt_len=3220, new_tokens=8, private_len=100, shared_tokens=6000)
    assert two - got == 46_080 * (6000 - 3220)


def test_cascade_fits_far_more_rows_of_a_shared_document(smollm2_shape):
    budget = M.footprint(smollm2_shape, 10, prompt_len=3220, new_tokens=96)  # exactly 10 copy-path rows
    assert M.rows_that_fit(smollm2_shape, prompt_len=3220, new_tokens=96, budget=budget, cap=256) == 10
    rows = M.rows_that_fit(smollm2_shape, prompt_len=3220, new_tokens=96, budget=budget, cap=256, private_len=100,
                           shared_tokens=3120)
    assert rows > 40
    # without a shared prefix (private = the whole prompt) the rule is the copy path's, plus the scores
    same = M.rows_that_fit(smollm2_shape, prompt_len=3220, new_tokens=96, budget=budget, cap=256, private_len=3220,
                           shared_tokens=0)
    assert same == 9
