"""One stored OWMI detection record under the ``choice`` read-out (g = ``choice_g``), for tests that build a
run directory of chosen detectors and score it (verdicts, forest plots)."""

from __future__ import annotations

from tamperbench.owmi.protocol.records import OwmiRun
from tamperbench.store.run_store import trial_key


def choice_detection_row(*, model: str, site: str, pair_id: str, item: int, condition: str, g: float) -> OwmiRun:
    return OwmiRun(
        key=trial_key([pair_id, condition]), pair_id=pair_id, cell_id="c", model=model, model_revision="rev",
        dtype="float32", quantized=False, temperature=0.0, top_p=1.0, max_new_tokens=8, readout="choice",
        benchmark="b", domain="knowledge", item_id=f"item{item}", item_provenance="{}", object_kind="resid_post",
        site=site, layer=3, operator="scale", dose=0.5, positions="task", when="prefill", seed=0,
        condition=condition, hook_scope="lifted", track="A", probe_family="detection", probe_text="p",
        prompt_text="t", prompt_ids=[1], intervened_positions=[], response="{}", finish_reason="choice",
        parse_ok=True, detected=g > 0.5, graded=None, choice_g=g)
