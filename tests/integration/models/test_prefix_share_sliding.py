"""Prefix-shared prefill on tiny sliding-window models (mistral: every layer slides; gemma2:
sliding and full layers alternate), decoding well past the window.

The hazard (issue 14): the suffix forward sees the prefix cache plus the suffixes, and the decoder
then measures the window per row from its KV columns. If either step measured the window over the
wrong columns, a shared row would attend to keys a lone prompt no longer sees once generation
passes the window. The reference is independent of both: a no-cache, unpadded full forward over
the whole context for every token (transformers measures the window in plain positions there).
Also checked: a shared prefix longer than the window is shared and exact, and the reference itself
moves when the window is one token off (so these comparisons can fail). Tiny random models
(config-built, no download, no mark).
"""

from __future__ import annotations

from functools import lru_cache

import pytest
import torch

from tamperbench.models.decoding import StepDecoder
from tamperbench.models.prefix_groups import MIN_SHARED
from tamperbench.models.prefix_share import PrefixAdmitter

V, WINDOW, NEW = 96, 28, 30  # 20-token shared prefix + 3 to 5-token suffixes, then 30 new tokens: past 28
COMMON = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.3, pad_token_id=0,
              bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)


@lru_cache(maxsize=None)
def _model(arch: str):
    import transformers as tf
    from transformers import AutoModelForCausalLM

    if arch == "mistral":
        cfg = tf.MistralConfig(**COMMON, sliding_window=WINDOW)
    else:
        cfg = tf.Gemma2Config(**COMMON, head_dim=8, sliding_window=WINDOW,
                              layer_types=["sliding_attention", "full_attention"])
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()


@lru_cache(maxsize=None)
@torch.inference_mode()
def _reference(arch: str, prompt: tuple[int, ...], new: int) -> list[int]:
    """Greedy, one full no-cache forward per token over the unpadded context."""
    model = _model(arch)
    ctx = list(prompt)
    for _ in range(new):
        ctx.append(int(model(input_ids=torch.tensor([ctx])).logits[0, -1].argmax()))
    return ctx[len(prompt):]


def _decode_admitted(model, prompts, new: int, capacity: int):
    """Admit through the PrefixAdmitter (as generate_chat does) and decode ``new`` tokens a row."""
    dec = StepDecoder(model, eos_ids=[2], topk=5, capacity=capacity)
    adm = PrefixAdmitter(dec, prompts)
    out: dict[int, list[int]] = {}
    rid_of: dict[int, int] = {}
    while adm.pending or any(len(v) < new for v in out.values()):
        for rid, i in adm.admit(dec.free_slots):
            rid_of[rid] = i
            out[rid] = []
        done = []
        for res in dec.step():
            out[res.row].append(res.token)
            if len(out[res.row]) >= new:
                done.append(res.row)
        dec.release(done)
    return adm, [out[r] for r in sorted(out, key=rid_of.__getitem__)]


def _prompts(shared: int, suffixes=(3, 5, 4), seed=1):
    g = torch.Generator().manual_seed(seed)
    head = torch.randint(3, V, (shared,), generator=g).tolist()
    return [head + torch.randint(3, V, (k,), generator=g).tolist() for k in suffixes]


@pytest.mark.parametrize("arch", ["mistral", "gemma2"])
@pytest.mark.parametrize("capacity", [3, 2])  # 2: the group waits with its prefix cache for a slot
def test_shared_prefix_decodes_past_the_window_like_each_prompt_alone(arch, capacity):
    model = _model(arch)
    prompts = _prompts(MIN_SHARED + 4)
    assert max(map(len, prompts)) <= WINDOW < max(map(len, prompts)) + NEW
    adm, got = _decode_admitted(model, prompts, NEW, capacity)
    assert adm.share and [g.prefix for g in adm.groups] == [MIN_SHARED + 4]  # the shared path ran
    assert adm.prefill_tokens < adm.prefill_tokens_alone
    assert got == [_reference(arch, tuple(p), NEW) for p in prompts]


@pytest.mark.parametrize("arch", ["mistral", "gemma2"])
def test_prefix_longer_than_the_window_is_shared_and_still_exact(arch):
    model = _model(arch)
    prompts = _prompts(WINDOW + 6, suffixes=(2, 5, 3))  # the shared prefix alone is longer than the window
    adm, got = _decode_admitted(model, prompts, 20, 2)
    assert adm.share and [g.prefix for g in adm.groups] == [WINDOW + 6]
    assert got == [_reference(arch, tuple(p), 20) for p in prompts]


@pytest.mark.parametrize("arch", ["mistral", "gemma2"])
def test_the_reference_sees_an_off_by_one_window(arch):
    """The comparisons above can fail: a window one token wider or narrower changes the tokens."""
    model = _model(arch)
    prompts = _prompts(MIN_SHARED + 4)
    want = [_reference(arch, tuple(p), NEW) for p in prompts]
    layers = [layer.self_attn for layer in model.model.layers]
    try:
        for w in (WINDOW - 1, WINDOW + 1):
            model.config.sliding_window = w
            for attn in layers:
                if getattr(attn, "sliding_window", None):
                    attn.sliding_window = w
            assert [_reference.__wrapped__(arch, tuple(p), NEW) for p in prompts] != want
    finally:
        model.config.sliding_window = WINDOW
        for attn in layers:
            if getattr(attn, "sliding_window", None):
                attn.sliding_window = WINDOW
