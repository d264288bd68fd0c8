"""Track C's context carries no introspection system prompt; the other tracks' contexts do.

Why: Track C asks for a reflection "with no intervention cue and no introspective question"
(Section 3.3), so an anomaly report has to be volunteered. The shared system prompt of the other
tracks ("You are a careful introspection assistant...", Section 6.1) is such a cue, and it sat in
front of the task turn Track C reflects on. Track C now runs in its own frame with no system
message (the chat template's default, written out here by hand), its task answered and impact
measured in that context, and every record names the system message it was given.
"""

from __future__ import annotations

import pytest

from tamperbench.errors import UserError
from tamperbench.owmi.run.spec import quick_spec

SHARED = ("You are a careful introspection assistant. When asked about your own processing, return only the "
          "requested JSON object.")
TEMPLATE_DEFAULT = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"


def _spec(**over):
    base = dict(items_per_benchmark=1, probes=["detection"], tracks=["A", "C"], conditions=["intervention", "sham"],
                operators=[{"name": "noise", "dose": 4.0}], seeds=[0], observer_classifier=False, task_max_new_tokens=4,
                probe_max_new_tokens=4, reflection_max_new_tokens=4)
    return quick_spec(**{**base, **over})


def test_frames_follow_the_spec():
    from tamperbench.owmi.protocol.design import frames

    assert frames(_spec().tracks, _spec().track_c_system) == {"shared": ("A",), "neutral": ("C",)}
    shared = _spec(track_c_system="shared")
    assert frames(shared.tracks, shared.track_c_system) == {"shared": ("A", "C")}  # the earlier runs' context
    assert _spec().frames() == frames(_spec().tracks, _spec().track_c_system) and _spec().frame("C") == "neutral"


@pytest.mark.model
def test_track_c_context_has_no_introspection_system_prompt(embedded_backend, run_one_unit):
    _, _, _, rows = run_one_unit(embedded_backend, _spec())
    by_track = {t: [r for r in rows if r["track"] == t] for t in ("A", "C")}
    assert all(len(v) == 4 for v in by_track.values())  # 2 conditions x 2 scopes
    tok = embedded_backend.tokenizer
    for r in by_track["A"]:
        assert r["prompt_text"].startswith(f"<|im_start|>system\n{SHARED}<|im_end|>\n")
        assert r["system_prompt"] == SHARED
    for r in by_track["C"]:
        assert r["prompt_text"].startswith(TEMPLATE_DEFAULT + "<|im_start|>user\n")
        assert "introspection" not in r["prompt_text"].lower() and "JSON" not in r["prompt_text"]
        assert r["system_prompt"] is None
        assert tok.decode(r["prompt_ids"]).startswith(TEMPLATE_DEFAULT), "the ids the model saw, not only the text"
        if r["condition"] == "intervention":  # measured in its own context: the task tokens of that context
            assert "capital of France" in tok.decode([r["prompt_ids"][i] for i in r["intervened_positions"]])
            assert r["js_mean"] > 0


def test_an_older_run_is_not_resumed(tmp_path):
    """A run directory whose records table predates ``system_prompt`` (an older tamperbench, whose
    Track C records carry the introspection prompt) is refused, never extended with new records."""
    from tamperbench.owmi.run.runner import run
    from tamperbench.store import RunStore

    spec = _spec()
    with RunStore.open(tmp_path, spec) as st:
        st.con.execute('CREATE TABLE "owmi_runs" (key VARCHAR PRIMARY KEY, prompt_text VARCHAR)')
    with pytest.raises(UserError, match="owmi_runs was written by an older tamperbench.*system_prompt"):
        run(spec, tmp_path)


@pytest.mark.model
def test_runner_matches_track_c_in_its_own_frame(tmp_path, embedded_backend):
    """Through ``owmi run``: Track C's impact matching is its own calibration row (no system
    prompt, the batched path named), apart from the shared frame's, and its records say so."""
    from tamperbench.owmi.run.runner import run
    from tamperbench.store import RunStore

    spec = _spec(tracks=["A", "C"], conditions=["intervention", "random_matched"], scopes=["active"],
                 calibration_steps=1, task_max_new_tokens=2, probe_max_new_tokens=2, reflection_max_new_tokens=2)
    run(spec, tmp_path)
    with RunStore.open_existing(tmp_path, read_only=True) as st:
        cal = {c["system_prompt"]: c for c in st.rows("owmi_calibration")}
        rows = st.rows("owmi_runs")
    assert set(cal) == {SHARED, None} and {c["path"] for c in cal.values()} == {"batched"}
    assert cal[None]["key"] != cal[SHARED]["key"] and cal[None]["target_js"] != cal[SHARED]["target_js"]
    for r in rows:
        want = None if r["track"] == "C" else SHARED
        assert r["system_prompt"] == want
        if r["condition"] == "random_matched":
            assert r["random_norm"] == cal[want]["eta"] and r["match_target_js"] == cal[want]["target_js"]
