"""The engines' own batch sizes (models/memory.py ``slot_batch`` and ``ragged_rows``) against
hand-computed byte counts, and OWMI's calibration grouping built on them.

The model here carries only the embedded model's shape (SmolLM2-135M: 30 layers, hidden 576, 9 query
heads, 3 key-value heads of 64, MLP 1,536, vocabulary 49,152, float32, sdpa): the rules read nothing
else. The free-memory figure is passed in (``free=``) instead of read from this machine: it is the
one machine-dependent input, and the only thing these tests replace. Every expected number below is
worked out by hand from those dims.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tamperbench.errors import UserError
from tamperbench.models import memory as M
from tamperbench.owmi.engine.batched import BatchedEngine


# The paper preset's context: longest chat prompt 43 tokens, 256 new tokens.
#   KV a token: 2 x 30 layers x 3 heads x 64 x 4 B = 46,080
#   decoder columns: 4 x (43 + 256) // 3 + 16 + 64 = 398 + 80 = 478 -> a row's KV 22,026,240 B,
#     plus 1.5 rows' worth / 30 layers (reallocation, trim) = 1,101,312 -> 23,127,552
#   pending distributions: 8 x 4 B x 49,152 = 1,572,864
#   a parked snapshot: 46,080 x (43 + 256) = 13,777,920
#   prefill of min(rows, 16,384 // 43 = 381) rows: 43 x (142,080 + 43 mask bytes) = 6,111,289 a row
#   a prefix held at batch 1: 46,080 x 43 = 1,981,440
# so for rows <= 381: footprint = rows x 44,589,625 + 1,981,440
PER_ROW, FIXED = 23_127_552 + 1_572_864 + 13_777_920 + 6_111_289, 1_981_440
FREE_100 = 2 * (100 * PER_ROW + FIXED)  # half of free memory is the budget: exactly 100 rows fit


def test_slot_footprint_by_hand(smollm2_shape):
    assert PER_ROW == 44_589_625
    assert M.footprint(smollm2_shape, 100, prompt_len=43, new_tokens=256, snapshot_len=299) == 100 * PER_ROW + FIXED
    assert M.footprint(smollm2_shape, 100, prompt_len=43, new_tokens=256) == 100 * (PER_ROW - 13_777_920) + FIXED


def test_slot_batch_fills_the_memory_given(smollm2_shape):
    c = M.slot_batch(smollm2_shape, "cpu", prompt_len=43, new_tokens=256, limit=91_000, ceiling=1000, free=FREE_100)
    assert (c.rows, c.by, c.cap, c.ceiling, c.limit, c.prompt_len, c.new_tokens) == \
        (100, "memory", None, 1000, 91_000, 43, 256)
    assert c.budget_bytes == FREE_100 // 2
    assert M.slot_batch(smollm2_shape, "cpu", prompt_len=43, new_tokens=256, limit=91_000, ceiling=1000,
                        free=FREE_100 - 2).rows == 99
    assert c.record() == {"batch_rows": 100, "batch_by": "memory", "batch_cap": None, "batch_ceiling": 1000,
                          "batch_limit": 91_000, "batch_prompt_len": 43, "batch_new_tokens": 256,
                          "batch_budget_bytes": FREE_100 // 2}


def test_without_a_batch_size_the_device_ceiling_bounds_it(smollm2_shape):
    c = M.slot_batch(smollm2_shape, "cpu", prompt_len=43, new_tokens=256, limit=91_000, free=2 * FREE_100)
    assert (c.rows, c.by, c.cap, c.ceiling) == (128, "device", None, 128)  # 200 fit; a CPU's ceiling is 128
    assert M.device_ceiling("cpu") == 128 and M.device_ceiling("cuda") == 256  # no GPU needed to name it
    c = M.slot_batch(smollm2_shape, "cpu", prompt_len=43, new_tokens=256, limit=91_000, free=FREE_100)
    assert (c.rows, c.by, c.ceiling) == (100, "memory", 128)
    c = M.slot_batch(smollm2_shape, "cpu", prompt_len=43, new_tokens=256, limit=91_000, ceiling=64, free=2 * (50 * PER_ROW + FIXED))
    assert (c.rows, c.by) == (50, "memory")  # memory lowers the ceiling


def test_a_long_prompt_gets_fewer_slots(smollm2_shape):
    # 1,000-token prompts + 256: columns 4 x 1,256 // 3 + 80 = 1,754 -> KV 80,824,320 + 4,041,216 = 84,865,536;
    # distributions 1,572,864; snapshot 46,080 x 1,256 = 57,876,480; prefill of min(rows, 16) rows:
    # 1,000 x (142,080 + 1,000) = 143,080,000 a row; held prefix 46,080,000. For rows <= 16:
    # rows x 287,394,880 + 46,080,000 <= 4,460,943,940 -> 15 rows
    long = M.slot_batch(smollm2_shape, "cpu", prompt_len=1000, new_tokens=256, limit=91_000, ceiling=1000, free=FREE_100)
    assert long.rows == 15 and long.by == "memory" and long.prompt_len == 1000
    assert M.footprint(smollm2_shape, 15, prompt_len=1000, new_tokens=256, snapshot_len=1256) == 15 * 287_394_880 + 46_080_000


def test_an_explicit_batch_size_caps_it(smollm2_shape):
    c = M.slot_batch(smollm2_shape, "cpu", prompt_len=43, new_tokens=256, limit=91_000, cap=32, free=FREE_100)
    assert (c.rows, c.by, c.cap, c.ceiling) == (32, "batch_size", 32, None)
    # a cap above what fits is lowered by memory (never raised), and named as such; the user's cap may
    # pass the device ceiling (64 on CPU)
    c = M.slot_batch(smollm2_shape, "cpu", prompt_len=43, new_tokens=256, limit=91_000, cap=500, free=FREE_100)
    assert (c.rows, c.by, c.cap) == (100, "memory", 500)
    c = M.slot_batch(smollm2_shape, "cpu", prompt_len=43, new_tokens=256, limit=91_000, cap=150, free=2 * FREE_100)
    assert (c.rows, c.by, c.cap) == (150, "batch_size", 150)  # 200 fit; above the CPU ceiling of 128
    with pytest.raises(UserError, match="--batch-size must be a positive integer, got 0"):
        M.slot_batch(smollm2_shape, "cpu", prompt_len=43, new_tokens=256, limit=10, cap=0, free=FREE_100)


def test_the_work_bounds_it(smollm2_shape):
    c = M.slot_batch(smollm2_shape, "cpu", prompt_len=43, new_tokens=256, limit=40, free=FREE_100)
    assert (c.rows, c.by) == (40, "work")
    c = M.slot_batch(smollm2_shape, "cpu", prompt_len=43, new_tokens=256, limit=40, cap=64, free=FREE_100)
    assert (c.rows, c.by) == (40, "work")  # the cap is above what the questions can fill


def test_no_room_for_one_row_is_refused_in_one_line(smollm2_shape):
    with pytest.raises(UserError, match=r"^a 43-token prompt with 256 new tokens needs 0\.0 GB to decode, but only "
                                        r"0\.0 GB is available \(0\.5 of free cpu memory\)"):
        M.slot_batch(smollm2_shape, "cpu", prompt_len=43, new_tokens=256, limit=10, free=2 * (PER_ROW + FIXED) - 2)


# OWMI's ragged teacher-forced batch: 4 rows of 300 tokens, js_chunk 128 -> 32 positions a row a forward:
#   cache 46,080 x 4 x 300 = 55,296,000, plus one layer's copy while it grows: / 30 = 1,843,200
#   forward: 4 x 32 tokens x 142,080 = 18,186,240, its sdpa mask 4 x 32 x 300 = 38,400
#   three float32 blocks of 128 x 49,152: 75,497,472
RAGGED_4 = 55_296_000 + 1_843_200 + 18_186_240 + 38_400 + 75_497_472


def test_ragged_footprint_by_hand(smollm2_shape):
    assert M.ragged_footprint(smollm2_shape, 4, length=300, block=32, vocab_floats=3 * 128 * 49152) == RAGGED_4
    # 5 rows (25 positions each): 69,120,000 + 2,304,000 + 17,760,000 + 37,500 + 75,497,472
    # 6 rows (21 positions each): 82,944,000 + 2,764,800 + 17,902,080 + 37,800 + 75,497,472
    assert M.ragged_footprint(smollm2_shape, 5, length=300, block=25, vocab_floats=3 * 128 * 49152) == 164_718_972
    assert M.ragged_footprint(smollm2_shape, 6, length=300, block=21, vocab_floats=3 * 128 * 49152) == 179_146_152


def test_ragged_rows_fit_the_memory_given(smollm2_shape):
    c = M.ragged_rows(smollm2_shape, "cpu", length=300, limit=10, block_tokens=128, free=2 * 164_718_972)
    assert (c.rows, c.by, c.limit, c.prompt_len) == (5, "memory", 10, 300)
    assert M.ragged_rows(smollm2_shape, "cpu", length=300, limit=10, block_tokens=128, free=2 * 164_718_972 - 2).rows == 4
    c = M.ragged_rows(smollm2_shape, "cpu", length=300, limit=3, block_tokens=128, free=2 * 164_718_972)
    assert (c.rows, c.by) == (3, "work")
    # longer rows, fewer of them, 600 tokens: 3 rows (42 positions) = 82,944,000 + 2,764,800 + 17,902,080 + 75,600
    # + 75,497,472 = 179,183,952 (over); 2 rows (64) = 55,296,000 + 1,843,200 + 18,186,240 + 76,800 + 75,497,472
    assert M.ragged_footprint(smollm2_shape, 2, length=600, block=64, vocab_floats=3 * 128 * 49152) == 150_899_712
    assert M.ragged_rows(smollm2_shape, "cpu", length=600, limit=10, block_tokens=128, free=2 * 164_718_972).rows == 2


class _Calib(BatchedEngine):
    def __init__(self, model):  # only what calibration_groups reads: the model's shape and js_chunk
        self.model, self.spec = model, SimpleNamespace(js_chunk=128)


def _unit(n: int, kept: bool):
    return SimpleNamespace(task=SimpleNamespace(ids=[0] * (n - 100)), base_ids=[0] * 100,
                           base_chunks=[] if kept else None)


def test_calibration_groups_keep_a_units_rows_together(smollm2_shape):
    eng = _Calib(smollm2_shape)
    units = [_unit(300, False), _unit(250, False), _unit(300, True), _unit(280, False)]  # 2 + 2 + 1 + 2 rows
    def groups(free):
        return [[next(i for i, u in enumerate(units) if u is g) for g in grp]
                for grp in eng.calibration_groups(units, free=free)]

    # everything fits: one group, the batch the engine always ran (records unchanged)
    assert groups(10**12) == [[0, 1, 2, 3]]
    assert (eng.calibration_batch.rows, eng.calibration_batch.by) == (7, "work")
    # 5 rows of 300 tokens fit: units packed in order (2 + 2 + 1 rows, then 2), a unit's rows never parted
    assert groups(2 * 164_718_972) == [[0, 1, 2], [3]]
    assert (eng.calibration_batch.rows, eng.calibration_batch.by, eng.calibration_batch.prompt_len) == (5, "memory", 300)
    assert groups(2 * 164_718_972 - 2) == [[0, 1], [2, 3]]  # 4 rows: 2 + 2, then 1 + 2
    # 3 rows (42 positions): 41,472,000 + 1,382,400 + 17,902,080 + 37,800 + 75,497,472 = 136,291,752
    assert M.ragged_footprint(smollm2_shape, 3, length=300, block=42, vocab_floats=3 * 128 * 49152) == 136_291_752
    assert groups(2 * 136_291_752) == [[0], [1, 2], [3]]  # 2, then 2 + 1, then 2: never 4 rows at once
    # one row at a time: a two-row unit still runs (its rows cannot be parted), alone
    one = 2 * M.ragged_footprint(smollm2_shape, 1, length=300, block=128, vocab_floats=3 * 128 * 49152)
    assert groups(one) == [[0], [1], [2], [3]]
