"""Architecture parity on tiny randomly initialised models (no download, no mark: ~1 s each).

For llama, qwen2, qwen3, mistral, gemma2, gemma3 (text) and phi3:

* the step decoder equals transformers' own ``generate`` (greedy, left-padded batch) token for
  token, on prompts of different lengths and past the sliding window (window 8, 30+ tokens) for
  the architectures that slide;
* after forced tokens and rollbacks (masked holes in the KV columns), every emitted token's
  log-prob equals a no-cache, unpadded forward over the row's final context, where transformers
  measures the sliding window in plain positions (the independent reference);
* each hook site in ``models/hooks.py`` reads the module it claims: resid_pre/resid_post match
  ``output_hidden_states``, head_out through the real o_proj gives attn_out, the block output is
  resid_pre plus the (normed, for gemma) attention and MLP outputs, and zeroing a site changes
  the logits.

Weights use initializer_range 0.3 so the tiny models' distributions are decisive: float noise
between the padded-batch and unpadded paths (~1e-6) must not flip an arg-max.
"""

from __future__ import annotations

import pytest
import torch

from tamperbench.models.decoding import StepDecoder
from tamperbench.models.hooks import SITES

V, WINDOW = 96, 8
COMMON = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=128, initializer_range=0.3, pad_token_id=0,
              bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)


def _config(arch: str):
    import transformers as tf

    if arch == "llama":
        return tf.LlamaConfig(**COMMON)
    if arch == "qwen2":
        return tf.Qwen2Config(**COMMON)
    if arch == "qwen3":
        return tf.Qwen3Config(**COMMON, head_dim=8)
    if arch == "mistral":
        return tf.MistralConfig(**COMMON, sliding_window=WINDOW)
    if arch == "gemma2":
        return tf.Gemma2Config(**COMMON, head_dim=8, sliding_window=WINDOW,
                               layer_types=["sliding_attention", "full_attention"])
    if arch == "gemma3":
        return tf.Gemma3TextConfig(**COMMON, head_dim=8, sliding_window=WINDOW,
                                   layer_types=["sliding_attention", "full_attention"])
    if arch == "phi3":
        return tf.Phi3Config(**COMMON, sliding_window=WINDOW)
    raise AssertionError(arch)


ARCHS = ["llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3", "phi3"]
SLIDING = {"mistral", "gemma2", "gemma3", "phi3"}


@pytest.fixture(scope="module", params=ARCHS)
def tiny(request):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    cfg = _config(request.param)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    assert (request.param in SLIDING) == bool(getattr(model.config, "sliding_window", None))
    return request.param, model


def _prompts(lengths=(3, 7, 12), seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(3, V, (n,), generator=g).tolist() for n in lengths]


def _generate(model, prompts, new):
    """transformers' greedy generate on a left-padded batch: the reference."""
    L = max(map(len, prompts))
    ids = torch.zeros(len(prompts), L, dtype=torch.long)
    am = torch.zeros(len(prompts), L, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, L - len(p):] = torch.tensor(p)
        am[i, L - len(p):] = 1
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=am, max_new_tokens=new, min_new_tokens=new,
                             do_sample=False, pad_token_id=0, eos_token_id=None)
    return out[:, L:].tolist()


def test_step_decoder_equals_generate_past_the_window(tiny):
    arch, model = tiny
    prompts, new = _prompts(), 24  # the longest row reaches 36 tokens, 4.5 windows
    ref = _generate(model, prompts, new)
    dec = StepDecoder(model, eos_ids=[2], topk=5, capacity=4, column_chunk=8)
    rids = dec.add_rows(prompts)
    got = {r: [] for r in rids}
    for _ in range(new):
        for res in dec.step():
            got[res.row].append(res.token)
    for r, want in zip(rids, ref):
        assert got[r] == want, f"{arch}: row {r} differs from generate"


@torch.inference_mode()
def _nocache_logprobs(model, ctx: list[int], n_prompt: int) -> torch.Tensor:
    logits = model(input_ids=torch.tensor([ctx])).logits[0]
    return torch.log_softmax(logits[n_prompt - 1: -1].float(), -1)


def test_forced_tokens_and_rollbacks_match_a_nocache_forward(tiny):
    """Holes from rollbacks and left padding from a later row must not shift the sliding window."""
    arch, model = tiny
    dec = StepDecoder(model, eos_ids=[2], topk=5, capacity=4, column_chunk=8)
    (a,) = dec.add_rows(_prompts((5,), seed=2))
    kept: list = []  # StepResults of the tokens that stay in row a
    for t in range(14):
        if t == 6:  # a later, longer row: everyone is left-padded again
            dec.add_rows(_prompts((11,), seed=3))
        res = {r.row: r for r in dec.step({a: 7} if t == 3 else None)}.get(a)
        if res is None:  # the step right after a deep rollback re-feeds silently
            assert t == 12
            continue
        kept.append(res)
        if t == 8:  # one-token rollback (restores the held distribution)
            dec.rollback(a, 1)
            kept.pop()
        if t == 11:  # three-token rollback (the next step re-feeds silently)
            dec.rollback(a, 3)
            del kept[-3:]
    for _ in range(12):
        kept.extend(r for r in dec.step() if r.row == a)
    toks = dec.tokens(a)
    assert [r.token for r in kept] == toks[5:] and len(toks) > 3 * WINDOW
    ref = _nocache_logprobs(model, toks, 5)
    for i, res in enumerate(kept):
        assert abs(float(ref[i, res.token]) - res.logprob) < 1e-4, f"{arch}: step {i} log-prob"
        if not res.forced:
            assert res.token == int(ref[i].argmax()), f"{arch}: step {i} not the reference arg-max"


@pytest.mark.parametrize("arch", ["mistral", "gemma2"])
def test_sliding_window_with_eager_attention(arch):
    """The same checks with eager attention, whose masks are additive floats rather than booleans."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    cfg = _config(arch)
    cfg._attn_implementation = "eager"
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    assert model.config._attn_implementation == "eager"
    test_step_decoder_equals_generate_past_the_window((arch, model))
    test_forced_tokens_and_rollbacks_match_a_nocache_forward((arch, model))


def test_hook_sites_hit_the_modules_they_claim(tiny):
    arch, model = tiny
    from tamperbench.models.hooks import capture, hooks

    ids = torch.tensor([_prompts((10,), seed=4)[0]])
    layer = 1
    sites = [f"{s}.{layer}" for s in SITES] + ["resid_post.0"]
    acts = capture(model, sites, ids)
    with torch.inference_mode():
        base = model(input_ids=ids, output_hidden_states=True)
    hs = base.hidden_states
    cfg = model.config
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    for s in ("resid_pre", "resid_post", "block_out", "attn_out", "mlp_out"):
        assert acts[f"{s}.{layer}"].shape == (1, 10, cfg.hidden_size), s
    assert acts[f"head_out.{layer}"].shape == (1, 10, heads, head_dim)
    torch.testing.assert_close(acts[f"resid_pre.{layer}"], hs[layer])
    torch.testing.assert_close(acts["resid_post.0"], hs[1])
    assert torch.equal(acts[f"block_out.{layer}"], acts[f"resid_post.{layer}"])
    block = model.model.layers[layer]
    with torch.inference_mode():
        torch.testing.assert_close(block.self_attn.o_proj(acts[f"head_out.{layer}"].flatten(-2)),
                                   acts[f"attn_out.{layer}"], atol=1e-5, rtol=1e-5)
        attn, mlp = acts[f"attn_out.{layer}"], acts[f"mlp_out.{layer}"]
        if arch.startswith("gemma"):  # gemma2/3 norm each branch before adding it to the residual
            attn, mlp = block.post_attention_layernorm(attn), block.post_feedforward_layernorm(mlp)
    torch.testing.assert_close(acts[f"resid_pre.{layer}"] + attn + mlp, acts[f"resid_post.{layer}"],
                               atol=1e-4, rtol=1e-4)
    for s in SITES:
        with hooks(model, [(f"{s}.0", torch.zeros_like)]), torch.inference_mode():
            edited = model(input_ids=ids).logits
        assert not torch.allclose(edited, base.logits, atol=1e-3), f"{arch}: zeroing {s}.0 changed nothing"


def _backend(model):
    """An HFBackend around a tiny model with no tokenizer files: only the ids the backend reads."""
    from types import SimpleNamespace

    from tamperbench.models.hf import HFBackend
    from tamperbench.models.provenance import ModelProvenance

    prov = ModelProvenance(source="tiny", kind="test", resolved_path="-", sha256="-", tamperbench_version="0")
    return HFBackend(model, SimpleNamespace(pad_token_id=0, eos_token_id=2), prov, device="cpu", max_batch_size=4)


def test_streamed_distributions_and_scores_equal_one_forward(tiny):
    arch, model = tiny
    be = _backend(model)
    ids = _prompts((40,), seed=5)[0]  # 5 windows long, streamed in chunks of 7
    with torch.inference_mode():
        full = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
    chunks = list(be.next_token_distributions(ids, chunk_size=7, start=10))
    positions = [p for ps, _ in chunks for p in ps]
    assert positions == list(range(10, 40)) and all(lp.shape[0] <= 7 for _, lp in chunks)
    torch.testing.assert_close(torch.cat([lp for _, lp in chunks]), full[10:], atol=1e-4, rtol=1e-4)
    scores = be.score(ids[:10], ids[10:], chunk_size=7)
    want = [float(full[i - 1, ids[i]]) for i in range(10, 40)]
    assert max(abs(a - b) for a, b in zip(scores, want)) < 1e-4


def test_context_guard_refuses_before_compute(tiny):
    from tamperbench.errors import UserError

    arch, model = tiny
    be = _backend(model)
    assert be.max_context == 128
    with pytest.raises(UserError, match=r"^row 1: prompt is 129 tokens \+ 0 new tokens = 129, past the model's "
                                        r"context length of 128 tokens$"):
        dec = be.step_decoder(capacity=2)
        dec.add_rows([[5] * 4, [5] * 129])
    assert dec.live_rows() == [] and dec.steps == 0 and dec.forward_seconds == 0
    with pytest.raises(UserError, match=r"^scored text: prompt is 130 tokens"):
        be.score([5] * 100, [6] * 30)
    with pytest.raises(UserError, match=r"^scored text: prompt is 129 tokens"):
        next(be.next_token_distributions([5] * 129))
