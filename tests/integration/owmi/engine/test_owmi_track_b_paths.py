"""Track B_visible and B_masked execution paths on the real embedded model: their targeted tests.

Why it exists: the decay rule (owmi/score/decay.py) licenses a contrast only on paths a
targeted test validates; the batched-vs-reference equivalence test shows two implementations
agree, not that either builds the right context or alters the right tokens. What each context
must be (contexts.py, Section 3.3):

* ``B_visible``: a fresh context holding the task, the condition's *own* task output as the
  assistant turn, then the probe as a later user turn; with ``positions="task"`` only the task
  text's tokens are altered at prefill (not the output, not the headers, not the probe).
* ``B_masked``: the probe alone; task and output withheld from the model and from the observer;
  the intervention acts on the only context before the probe (system prompt and user header).

Expected values by hand, not from the code under test: the prompt text is SmolLM2's ChatML written
out here; positions are counted by tokenizing text prefixes (the code uses offset mappings); the
sham's task output comes from a plain greedy loop over ``model(...)``; which positions the hook
reaches is read off the site's output, compared bit for bit with an unhooked pass: the output of
the hooked layer at a position depends only on the layer inputs up to it, which a hook on that
layer's output cannot change, so it differs exactly where the hook wrote. One item, tiny budgets.
"""

from __future__ import annotations

import pytest
import torch

from tamperbench.owmi.protocol.probes import probe_text
from tamperbench.owmi.run.spec import quick_spec

pytestmark = pytest.mark.model
TASK_NEW = 6


def _chatml(system: str, turns: list[tuple[str, str]]) -> str:
    out = f"<|im_start|>system\n{system}<|im_end|>\n"
    for role, text in turns:
        out += f"<|im_start|>{role}\n{text}<|im_end|>\n"
    return out + "<|im_start|>assistant\n"


def _n_tokens(tok, text: str) -> int:
    return len(tok(text, add_special_tokens=False)["input_ids"])


@pytest.fixture(scope="module")
def track_b(embedded_backend, run_one_unit):
    spec = quick_spec(items_per_benchmark=1, probes=["detection"], tracks=["B_visible", "B_masked"],
                      conditions=["intervention", "sham", "observer"], operators=[{"name": "noise", "dose": 4.0}], seeds=[0],
                      observer_classifier=False, task_max_new_tokens=TASK_NEW, probe_max_new_tokens=4)
    assert spec.positions == "task" and spec.when == "prefill" and spec.scopes == ("active", "lifted")
    return run_one_unit(embedded_backend, spec)  # the runner's batched engine


def _greedy(model, ids: list[int], n: int, eos: set[int]) -> list[int]:
    """Reference greedy decoding: plain forwards over a DynamicCache, no hook, no engine code."""
    from transformers import DynamicCache

    from tamperbench.owmi.engine.forward import _cache_kw  # the cache keyword this transformers version takes

    cache, out, feed = DynamicCache(), [], ids
    with torch.inference_mode():
        for _ in range(n):
            logits = model(input_ids=torch.tensor([feed]), use_cache=True, **{_cache_kw(model): cache}).logits[0, -1]
            t = int(logits.argmax())
            out.append(t)
            if t in eos:
                break
            feed = [t]
    return out


def test_track_b_contexts_hold_what_each_track_says(embedded_backend, track_b):
    eng, unit, item, rows = track_b
    tok, task = embedded_backend.tokenizer, item.prompt_text()
    probe = probe_text("detection", person="first", n_layers=embedded_backend.model.config.num_hidden_layers)
    by = {(r["track"], r["condition"], r["hook_scope"]): r for r in rows}
    assert set(by) == {(t, c, s) for t in ("B_visible", "B_masked") for c in ("intervention", "sham", "observer")
                       for s in ("active", "lifted")}
    # the sham's own task output is the unhooked model's greedy answer (computed here, not by the engine)
    task_ids = tok(_chatml(eng.system, [("user", task)]), add_special_tokens=False)["input_ids"]
    sham_out = tok.decode(_greedy(embedded_backend.model, task_ids, TASK_NEW, eng.eos), skip_special_tokens=True)
    outputs = {"sham": sham_out, "intervention": by[("B_visible", "intervention", "active")]["task_output"]}
    assert outputs["intervention"] != outputs["sham"], "the noise must change the answer, or 'own output' is untested"
    head = _n_tokens(tok, _chatml(eng.system, [])[: -len("<|im_start|>assistant\n")] + "<|im_start|>user\n")
    task_positions = list(range(head, head + _n_tokens(tok, task)))
    for cond in ("intervention", "sham"):
        for scope in ("active", "lifted"):
            vis = by[("B_visible", cond, scope)]
            want = _chatml(eng.system, [("user", task), ("assistant", outputs[cond]), ("user", probe)])
            assert vis["prompt_text"] == want, "B_visible: task, the condition's own output, then the probe"
            assert vis["task_output"] == outputs[cond]
            assert vis["prompt_ids"] == tok(want, add_special_tokens=False)["input_ids"]
            assert vis["intervened_positions"] == (task_positions if cond == "intervention" else [])

            masked = by[("B_masked", cond, scope)]
            want = _chatml(eng.system, [("user", probe)])
            assert masked["prompt_text"] == want, "B_masked: the probe alone"
            assert task not in masked["prompt_text"] and masked["task_output"] == ""
            assert not any(o.strip() in masked["prompt_text"] for o in outputs.values())
            split = _n_tokens(tok, want[: want.rindex(probe)])  # everything before the probe's first token
            assert masked["intervened_positions"] == (list(range(split)) if cond == "intervention" else [])
    # what the altered positions are, in words
    assert tok.decode([task_ids[i] for i in task_positions]) == task
    masked = by[("B_masked", "intervention", "active")]
    assert tok.decode([masked["prompt_ids"][i] for i in masked["intervened_positions"]]) == \
        f"<|im_start|>system\n{eng.system}<|im_end|>\n<|im_start|>user\n"
    # the observer: the intervention's visible record on B_visible, nothing of the task on B_masked
    obs_vis, obs_masked = by[("B_visible", "observer", "active")], by[("B_masked", "observer", "active")]
    assert task in obs_vis["prompt_text"] and outputs["intervention"] in obs_vis["prompt_text"]
    assert "(the record is withheld)" in obs_masked["prompt_text"] and task not in obs_masked["prompt_text"]
    assert outputs["intervention"] not in obs_masked["prompt_text"] and obs_masked["intervened_positions"] == []


@pytest.mark.parametrize("track", ["B_visible", "B_masked"])
@pytest.mark.parametrize("scope", ["active", "lifted"])
def test_hook_reaches_exactly_the_declared_positions(embedded_backend, track_b, track, scope):
    """Prefill alters the declared positions only; the probe tokens are altered under the active scope
    and untouched once the hook is lifted."""
    from transformers import DynamicCache

    from tamperbench.models.hooks import hooks, resolve_site
    from tamperbench.owmi.engine.forward import _cache_kw

    eng, unit, _item, rows = track_b
    r = next(x for x in rows if (x["track"], x["condition"], x["hook_scope"]) == (track, "intervention", scope))
    ids, declared = r["prompt_ids"], r["intervened_positions"]
    probe_at = r["prompt_text"].rindex(r["probe_text"])
    split = _n_tokens(embedded_backend.tokenizer, r["prompt_text"][:probe_at])
    model = embedded_backend.model
    layer, _, _ = resolve_site(model, unit.target.site)

    def site_output(iv) -> torch.Tensor:
        seen = []
        cache = DynamicCache()
        with hooks(model, iv.hook_pairs() if iv else []), torch.inference_mode():
            h = layer.register_forward_hook(lambda m, a, out: seen.append(
                (out[0] if isinstance(out, tuple) else out)[0].clone()))  # after the intervention's hook
            try:
                for lo, hi, phase in ((0, split, "prefill"), (split, len(ids), "probe")):
                    if iv is not None:
                        iv.phase, iv.offset = phase, lo
                    model(input_ids=torch.tensor([ids[lo:hi]]), use_cache=True, **{_cache_kw(model): cache})
            finally:
                h.remove()
        return torch.cat(seen)

    base = site_output(None)
    hooked = site_output(eng.make_iv(unit, "intervention", declared, scope))
    assert base.shape[0] == len(ids)
    changed = [p for p in range(len(ids)) if not torch.equal(base[p], hooked[p])]
    want = declared + (list(range(split, len(ids))) if scope == "active" else [])
    assert changed == want
    assert declared and max(declared) < split
