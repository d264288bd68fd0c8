"""The batch-size rule of models/memory.py against hand-computed byte counts.

The model here carries only the embedded model's shape (SmolLM2-135M: 30 layers, hidden 576, 9
query heads, 3 key-value heads of 64, MLP 1,536, vocabulary 49,152, float32): the rule reads
nothing else, and every expected number below is worked out by hand from those dims.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tamperbench.errors import UserError
from tamperbench.models import memory as M


class _Shape:
    def __init__(self, attn: str = "sdpa"):
        self.config = SimpleNamespace(num_hidden_layers=30, hidden_size=576, num_attention_heads=9,
                                      num_key_value_heads=3, head_dim=64, intermediate_size=1536,
                                      vocab_size=49152, _attn_implementation=attn)
        self._p = torch.zeros(1, dtype=torch.float32)

    def parameters(self):
        yield self._p


def test_kv_bytes_and_columns_by_hand():
    assert M.kv_bytes_per_token(_Shape()) == 2 * 30 * 3 * 64 * 4 == 46_080
    # 4/3 of (3,220 + 8) = 4,304, + 16 steps between trims + one 64-column growth chunk
    assert M.decoder_columns(3220, 8) == 4384
    assert M.decoder_columns(0, 0) == 80


def test_prefill_transient_by_hand():
    # per token: KV 46,080 + activations 2.5 x 4 B x (4*576 + 2*9*64 + 4*1536 = 9,600) = 96,000
    assert M.prefill_bytes(_Shape("sdpa"), 5, 3220) == 5 * 3220 * 142_080 + 5 * 3220 * 3220 == 2_339_330_000
    # eager adds float32 scores, masked scores and softmax: 3 x 9 heads x 4 B = 108 B per (row, q, k)
    assert M.prefill_bytes(_Shape("eager"), 5, 3220) == 2_287_488_000 + 5 * 3220 * 3220 * 108 == 7_886_424_000
    assert M.prefill_bytes(_Shape("flash_attention_2"), 5, 3220) == 2_287_488_000


def test_footprint_by_hand():
    # 10 rows of the depth preset (3,220-token prompts, 8 new tokens):
    #   KV a row 46,080 x 4,384 = 202,014,720; x 10 = 2,020,147,200, plus 1.5 rows' worth / 30 layers
    #   (one layer reallocated, one trimmed) = 101,007,360
    #   distributions 10 x 8 x 4 B x 49,152 = 15,728,640
    #   one prefill forward of min(10, 16,384 // 3,220 = 5) rows: 2,339,330,000
    #   a shared prefix held at batch 1: 46,080 x 3,220 = 148,377,600
    expect = 2_020_147_200 + 101_007_360 + 15_728_640 + 2_339_330_000 + 148_377_600
    assert expect == 4_624_590_800
    assert M.footprint(_Shape(), 10, prompt_len=3220, new_tokens=8) == expect
    assert M.rows_that_fit(_Shape(), prompt_len=3220, new_tokens=8, budget=expect, cap=64) == 10
    assert M.rows_that_fit(_Shape(), prompt_len=3220, new_tokens=8, budget=expect - 1, cap=64) == 9
    assert M.rows_that_fit(_Shape(), prompt_len=3220, new_tokens=8, budget=10**15, cap=64) == 64
    assert M.rows_that_fit(_Shape(), prompt_len=3220, new_tokens=8, budget=10**6, cap=64) == 0


def test_long_prompts_get_fewer_rows_than_short_ones():
    budget = 8 * 2**30
    long_rows = M.rows_that_fit(_Shape(), prompt_len=3220, new_tokens=8, budget=budget)
    short_rows = M.rows_that_fit(_Shape(), prompt_len=458, new_tokens=8, budget=budget)
    assert long_rows < 64 <= short_rows  # the depth preset's length-blind batch 64 held 13 GB


def test_generation_batch_lowers_the_cap_with_a_note(capsys):
    M._noted.clear()
    assert M.generation_batch(_Shape(), "cpu", prompt_len=3220, new_tokens=8, cap=64, budget=4_624_590_800) == 10
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("note: batch lowered from 64 to 10 rows")
    assert M.generation_batch(_Shape(), "cpu", prompt_len=3220, new_tokens=8, cap=64, budget=4_624_590_800) == 10
    assert capsys.readouterr().err == ""  # once per distinct note, not once per call
    assert M.generation_batch(_Shape(), "cpu", prompt_len=3220, new_tokens=8, cap=4, budget=4_624_590_800) == 4
    assert capsys.readouterr().err == ""  # a cap that fits is kept silently


def test_generation_batch_refuses_when_one_row_cannot_fit():
    with pytest.raises(UserError) as err:
        M.generation_batch(_Shape(), "cpu", prompt_len=3220, new_tokens=8, cap=64, budget=5 * 10**8)
    msg = str(err.value)
    assert "\n" not in msg and "3220-token prompt needs" in msg and "0.5 GB" in msg
    with pytest.raises(UserError, match="--batch-size"):
        M.generation_batch(_Shape(), "cpu", prompt_len=10, new_tokens=1, cap=0, budget=10**12)


def test_choose_batch_size_notes_a_lowered_explicit_cap(capsys, monkeypatch):
    M._noted.clear()
    budget = 2 * M.footprint(_Shape(), 7, prompt_len=1024, new_tokens=0)  # fraction 0.5 of "free"
    monkeypatch.setattr(M, "free_bytes", lambda device: budget)
    assert M.choose_batch_size(_Shape(), "cpu") == 7  # default cap 64, silently lowered to what fits
    assert capsys.readouterr().err == ""
    assert M.choose_batch_size(_Shape(), "cpu", cap=50) == 7
    assert capsys.readouterr().err.startswith("note: --batch-size 50 lowered to 7")
    assert M.choose_batch_size(_Shape(), "cpu", cap=3) == 3


def test_prefill_chunk_constants_agree():
    """The rule sizes one prefill forward by the decoder's and prefix sharing's chunk constants."""
    from tamperbench.models import prefix_groups
    from tamperbench.models.decoding import decoder

    assert M.PREFILL_TOKENS == decoder._PREFILL_TOKENS == prefix_groups._PREFILL_COLUMNS
