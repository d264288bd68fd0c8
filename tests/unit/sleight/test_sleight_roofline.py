"""The swap engine's roofline model (sleight/roofline.py): every expected value is worked out by hand
in the comments (or, for the weighted fit, cross-checked with numpy.polyfit)."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tamperbench.sleight import roofline

# SmolLM2-135M's shape: 30 layers, 9 query heads, 3 key-value heads, head dim 576 / 9 = 64
SMOL = SimpleNamespace(num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, hidden_size=576)


def test_mfu_is_tokens_per_second_times_flop_over_peak():
    # 100 tokens in 2 s = 50 tok/s; x 1e9 FLOP/token = 5e10 FLOP/s; / 1e11 = 0.5
    assert roofline.mfu(100, 2.0, 1e9, 1e11) == pytest.approx(0.5)


def test_kv_bytes_and_attention_flop_per_column_of_smollm():
    # keys + values (2) x 30 layers x 3 kv heads x 64 dims x 4 bytes = 46,080
    assert roofline.kv_bytes_per_column(SMOL) == 46080
    assert roofline.kv_bytes_per_column(SMOL, dtype_bytes=2) == 23040
    # q.k and p.v, 2 FLOP each per dim (4) x 30 layers x 9 query heads x 64 dims = 69,120
    assert roofline.attention_flop_per_column(SMOL) == 69120
    no_gqa = SimpleNamespace(num_hidden_layers=2, num_attention_heads=4, hidden_size=32)  # head dim 8, kv heads = 4
    assert roofline.kv_bytes_per_column(no_gqa) == 2 * 2 * 4 * 8 * 4


def test_weight_bytes_counts_a_tied_weight_once():
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10)
    head.weight = emb.weight
    model = torch.nn.ModuleDict({"emb": emb, "head": head})
    # 10 x 4 shared weight + 10 bias = 50 float32 = 200 bytes (not 360 with the weight twice)
    assert roofline.weight_bytes(model) == 200


PROFILE = {2: [3, 0.3, 30], 8: [1, 0.2, 20]}  # rows: [steps, forward seconds, columns summed]


def test_bound_by_hand():
    rl = roofline.bound(PROFILE, flop_per_token=1e9, weight_bytes=1e9, kv_bytes_per_column=1e6,
                        attention_flop_per_column=1e7, peak=1e11, bandwidth=1e10)
    # 2 rows, 10 columns: flop 2 x (1e9 + 10 x 1e7) = 2.2e9 -> 0.022 s; bytes 1e9 + 2 x 10 x 1e6 = 1.02e9 -> 0.102 s
    # 8 rows, 20 columns: flop 8 x (1e9 + 20 x 1e7) = 9.6e9 -> 0.096 s; bytes 1e9 + 8 x 20 x 1e6 = 1.16e9 -> 0.116 s
    assert rl.steps == 4 and rl.rows == 14
    assert rl.seconds_overlap == pytest.approx(3 * 0.102 + 0.116)  # 0.422
    assert rl.seconds_no_overlap == pytest.approx(3 * 0.124 + 0.212)  # 0.584
    assert rl.flop == pytest.approx(3 * 2.2e9 + 9.6e9)
    assert rl.bytes == pytest.approx(3 * 1.02e9 + 1.16e9)
    # 14 delivered tokens x 1e9 / 1e11 = 0.14 s of peak compute
    over, none = rl.attainable(14, 1e9, 1e11)
    assert over == pytest.approx(0.14 / 0.422)
    assert none == pytest.approx(0.14 / 0.584)


def test_fit_step_cost_recovers_an_exact_cost_model():
    # steps cost 0.02 s + 0.003 s per row + 1e-5 s per row and column, exactly
    def cost(r, c):
        return 0.02 + 0.003 * r + 1e-5 * r * c

    prof = {r: [n, n * cost(r, c), n * c] for r, n, c in ((2, 5, 200), (8, 1, 120), (20, 3, 60), (30, 2, 40))}
    fit = roofline.fit_step_cost(prof)
    assert (fit.fixed, fit.per_row, fit.per_row_column) == pytest.approx((0.02, 0.003, 1e-5))


def test_fit_step_cost_weights_every_step_alike():
    # step means 0.1 (1 row), 0.1 (2 rows), 0.4 (3 rows, two steps), 0.3 (4 rows); no columns
    prof = {1: [1, 0.1, 0], 2: [1, 0.1, 0], 3: [2, 0.8, 0], 4: [1, 0.3, 0]}
    assert roofline.fit_step_cost(prof) is None  # rows x columns all zero: a degenerate design
    prof = {r: [n, s, n * 10] for r, (n, s, _) in prof.items()}  # 10 columns each: r x c = 10 r, collinear with r
    assert roofline.fit_step_cost(prof) is None
    prof[4][2] = 1 * 30  # 30 columns at 4 rows
    fit = roofline.fit_step_cost(prof)
    # every step as a point of an ordinary least squares (independent: numpy.polyfit cannot, so lstsq on 5 rows)
    x = np.array([[1, 1, 10], [1, 2, 20], [1, 3, 30], [1, 3, 30], [1, 4, 120]], dtype=float)
    y = np.array([0.1, 0.1, 0.4, 0.4, 0.3])
    ref = np.linalg.lstsq(x, y, rcond=None)[0]
    assert (fit.fixed, fit.per_row, fit.per_row_column) == pytest.approx(tuple(ref))


def test_fit_consequences_by_hand():
    fit = roofline.StepCostFit(fixed=0.025, per_row=0.025)
    # one token of compute at peak: 1e9 / 1e11 = 0.01 s; per row 0.025 s -> 0.4 at unbounded batch
    assert fit.limit_mfu(1e9, 1e11) == pytest.approx(0.4)
    # MFU 0.2 at r rows: 0.01 r / (0.025 + 0.025 r) = 0.2 -> 0.005 r = 0.005 -> r = 1
    assert fit.rows_for(0.2, 1e9, 1e11) == pytest.approx(1.0)
    assert fit.rows_for(0.5, 1e9, 1e11) == float("inf")  # above the 0.4 limit


def test_fit_step_cost_at_one_context_length_by_hand():
    # 0.05 s at 1 row (one step), 0.15 s at 5 rows (three steps): slope 0.1 / 4 = 0.025, fixed 0.025
    fit = roofline.fit_step_cost({1: [1, 0.05, 100], 5: [3, 0.45, 300]}, columns=False)
    assert (fit.fixed, fit.per_row, fit.per_row_column) == pytest.approx((0.025, 0.025, 0.0))
    # three points, unequal weights: every step a point of numpy.polyfit
    fit = roofline.fit_step_cost({1: [1, 0.1, 0], 2: [1, 0.1, 0], 3: [2, 0.8, 0]}, columns=False)
    slope, icept = np.polyfit([1, 2, 3, 3], [0.1, 0.1, 0.4, 0.4], 1)
    assert (fit.per_row, fit.fixed) == pytest.approx((slope, icept))
    assert fit.per_row == pytest.approx(0.45 / 2.75)  # by hand: sxy 0.45 / sxx 2.75 about the means


def test_fit_step_cost_needs_three_row_counts():
    assert roofline.fit_step_cost({4: [10, 1.0, 100], 5: [2, 0.3, 20]}) is None
    assert roofline.fit_step_cost({4: [10, 1.0, 100]}, columns=False) is None
    assert roofline.fit_step_cost({}) is None


def test_rows_needed_from_the_ridge():
    # ridge: weight read 1e9 / 1e10 = 0.1 s equals compute of 0.1 / (1e9 / 1e11) = 10 rows
    over, none = roofline.rows_needed(0.7, flop_per_token=1e9, step_bytes=1e9, peak=1e11, bandwidth=1e10)
    assert over == pytest.approx(7.0)  # 0.7 x 10
    assert none == pytest.approx(0.7 / 0.3 * 10)  # 0.01 r / (0.01 r + 0.1) = 0.7 -> r = 23.33
