"""Anchors attach to the weights they were fitted on (``profile._anchor_for``), not to a model name.

A probe fitted on float32 weights must not anchor a bfloat16 or dequantized-GGUF cell of the same
name, and rho = margin / m_probe must divide each identity's margin by its own probe's margin. An
anchor written before anchors recorded their weights attaches by name only where the run set
holds one identity under that name, and says so. Anchor dicts and run rows are synthesised; the
scored case writes real OwmiRun rows to a real DuckDB run directory and saves the anchors through
the real anchor store. Expected rho values are worked by hand from the rows' detection counts.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pydantic import BaseModel

from tamperbench.owmi.score import identity
from tamperbench.owmi.score.anchor_store import save_anchor, weights_identity
from tamperbench.owmi.score.claims import BY_NAME
from tamperbench.owmi.score.profile import _anchor_for, score_runs
from tamperbench.owmi.protocol.records import RUNS_TABLE, OwmiRun
from tamperbench.store import RunStore
from tamperbench.store.run_store import trial_key

# the cells' own intervention (C.8: a probe attaches only to cells whose intervention it read)
OWN_IV = {"intervention": {"operator": "add", "dose": 4.0, "direction": "concepts ocean"}}

REV = "rev-aaaaaaaaaaaaaaaa"
F32 = {"model": "m", "model_revision": REV, "dtype": "float32", "quantized": False}
BF16 = {**F32, "dtype": "bfloat16"}
GGUF = {**F32, "quantized": True}  # a dequantized GGUF read at float32: same name, revision and dtype


def _probe(ident: dict | None, m_probe: float, tag: str, site: str = "resid_post.3", model: str = "m") -> dict:
    base = {"kind": "probe", **OWN_IV, "model": model, "provenance_id": "pid", "site": site, "layer": int(site.split(".")[1]),
            "m_probe": m_probe, "passes": True, "layers": [{"null_quantile": 0.1}], "tag": tag}
    return {**base, **(ident or {})}


def test_a_float32_probe_never_anchors_a_bfloat16_or_quantized_cell_of_the_same_name():
    f32 = _probe(F32, 0.5, "f32")
    idents = {identity.of(F32), identity.of(BF16), identity.of(GGUF)}
    assert _anchor_for([f32], "probe", BF16, "resid_post.3", idents) is None
    assert _anchor_for([f32], "probe", GGUF, "resid_post.3", idents) is None
    # even where the run set holds only the bfloat16 weights: a recorded identity is never overridden by name
    assert _anchor_for([f32], "probe", BF16, "resid_post.3", {identity.of(BF16)}) is None
    assert _anchor_for([f32], "probe", {**F32, "model_revision": "rev-other"}, "resid_post.3", idents) is None
    got = _anchor_for([f32], "probe", F32, "resid_post.3", idents)
    assert got["tag"] == "f32" and got["identity_matched"] is True
    assert "identity_matched" not in f32  # the input anchor is not modified


def test_each_identity_gets_its_own_anchor_the_last_one_and_site_matching_still_applies():
    anchors = [_probe(F32, 0.5, "f32 early"), _probe(BF16, 0.6, "bf16"), _probe(F32, 0.45, "f32 later"),
               _probe(F32, 0.3, "f32 other site", site="resid_post.9"),
               {**_probe(F32, 0.0, "kp f32", site="resid_post.5"), "kind": "known_positive"}]
    idents = {identity.of(F32), identity.of(BF16)}
    assert _anchor_for(anchors, "probe", F32, "resid_post.3", idents)["tag"] == "f32 later"
    assert _anchor_for(anchors, "probe", BF16, "resid_post.3", idents)["tag"] == "bf16"
    assert _anchor_for(anchors, "probe", F32, "resid_post.9", idents)["tag"] == "f32 other site"
    assert _anchor_for(anchors, "probe", BF16, "resid_post.9", idents) is None
    assert _anchor_for(anchors, "probe", F32, "resid_post.4", idents) is None
    assert _anchor_for(anchors, "known_positive", F32, None, idents)["tag"] == "kp f32"  # any site when none is asked
    assert _anchor_for(anchors, "known_positive", BF16, None, idents) is None
    # another name with the same revision, dtype and flag is other weights
    assert _anchor_for(anchors, "probe", {**F32, "model": "m2"}, "resid_post.3", idents | {identity.of({**F32, "model": "m2"})}) \
        is None


def test_an_old_anchor_without_identity_attaches_by_name_only_under_one_identity_and_is_marked():
    old = _probe(None, 0.7, "old")
    for ident in (F32, BF16, GGUF):  # whichever single identity the run set holds under the name
        got = _anchor_for([old], "probe", ident, "resid_post.3", {identity.of(ident)})
        assert got["tag"] == "old" and got["identity_matched"] is False
    # another model's identity in the set does not count against this name
    got = _anchor_for([old], "probe", F32, "resid_post.3", {identity.of(F32), identity.of({**BF16, "model": "x"})})
    assert got["identity_matched"] is False
    for other in (BF16, GGUF):  # two identities under the name: no guess, for either cell
        idents = {identity.of(F32), identity.of(other)}
        assert _anchor_for([old], "probe", F32, "resid_post.3", idents) is None
        assert _anchor_for([old], "probe", other, "resid_post.3", idents) is None
    assert _anchor_for([old], "probe", F32, "resid_post.9", {identity.of(F32)}) is None  # site still applies
    assert _anchor_for([old], "probe", {**F32, "model": "x"}, "resid_post.3", {identity.of({**F32, "model": "x"})}) is None
    # partly recorded (dtype missing) is old: it is not matched as if dtype were None
    part = {k: v for k, v in _probe(F32, 0.7, "part").items() if k != "dtype"}
    assert _anchor_for([part], "probe", {**F32, "dtype": None}, "resid_post.3",
                       {identity.of(F32), identity.of({**F32, "dtype": None})}) is None
    assert _anchor_for([part], "probe", F32, "resid_post.3", {identity.of(F32)})["identity_matched"] is False


def test_weights_identity_fills_the_fields_as_run_records_do():
    from tamperbench.models.provenance import ModelProvenance
    from tamperbench.owmi.engine.record import _revision

    def backend(**kw):
        return SimpleNamespace(provenance=ModelProvenance(source="s", kind="gguf", resolved_path="/p", sha256="sha-x",
                                                          tamperbench_version="0", **kw))

    b = backend(dtype="float32", quantization="Q4_K_M")
    assert weights_identity(b) == {"model_revision": "sha-x", "dtype": "float32", "quantized": True}
    assert weights_identity(b)["model_revision"] == _revision(b)
    b = backend(dtype="bfloat16", revision="r1")
    assert weights_identity(b) == {"model_revision": "r1", "dtype": "bfloat16", "quantized": False}
    assert weights_identity(b)["model_revision"] == _revision(b)


class _Spec(BaseModel):
    name: str = "anchor identity"


def _rows(ident: dict, hits: int, fas: int, n: int = 10) -> list[OwmiRun]:
    """n pairs; the first ``hits`` interventions and the first ``fas`` shams report detection."""
    out = []
    for i in range(n):
        for cond, det in (("intervention", i < hits), ("sham", i < fas)):
            out.append(OwmiRun(
                key=trial_key([ident["dtype"], ident["quantized"], i, cond]), pair_id=f"p{i}", cell_id="c",
                temperature=0.0, top_p=1.0, max_new_tokens=8, readout="generated", benchmark="b", domain="knowledge", item_id=f"item{i}",
                item_provenance="{}", object_kind="resid_post", site="resid_post.3", layer=3, operator="add", dose=4.0,
                positions="task", when="prefill", seed=0, condition=cond, hook_scope="active", track="A",
                probe_family="detection", probe_text="p", prompt_text="t", prompt_ids=[1], intervened_positions=[],
                response="{}", finish_reason="stop", parse_ok=True, detected=det, graded=0.9 if det else 0.1, **ident))
    return out


def _score(tmp, name: str, records: list[OwmiRun], anchors: list[dict]) -> dict:
    store = RunStore.open(tmp / name, _Spec(name=name))
    store.ensure_table(RUNS_TABLE, OwmiRun)
    store.write(RUNS_TABLE, records)
    store.close()
    paths = [save_anchor(tmp / f"{name}-a{i}", _Spec(name=f"{name} {i}"), a) for i, a in enumerate(anchors)]
    res = score_runs([tmp / name, *paths], n_boot=20, dose_boot=0)
    return {(c["cell"]["dtype"], c["cell"]["quantized"]): c for c in res["cells"] if c["cell"]["probe_family"] == "detection"}


def test_score_gives_each_identity_its_own_rho_and_marks_a_by_name_anchor(tmp_path):
    # float32: 8 of 10 hits, 2 of 10 false alarms -> margin 0.6; bfloat16: 6 and 3 -> margin 0.3
    two = _rows(F32, 8, 2) + _rows(BF16, 6, 3)
    cells = _score(tmp_path, "two", two, [_probe(F32, 0.5, "f32"), _probe(BF16, 0.6, "bf16")])
    f32, bf16 = cells[("float32", False)], cells[("bfloat16", False)]
    assert f32["detection"]["complete"]["margin"] == pytest.approx(0.6)
    assert bf16["detection"]["complete"]["margin"] == pytest.approx(0.3)
    assert f32["rho"]["rho"] == pytest.approx(0.6 / 0.5)  # 1.2, not 0.6 / 0.6 = 1.0
    assert bf16["rho"]["rho"] == pytest.approx(0.3 / 0.6)  # 0.5, not 0.3 / 0.5 = 0.6
    assert any("m_probe=+0.500" in h for h in f32["claim"]["held"])
    assert any("m_probe=+0.600" in h for h in bf16["claim"]["held"])
    assert not any(BY_NAME in h for h in f32["claim"]["held"] + bf16["claim"]["held"])

    # an old anchor (no identity) beside two identities of its name: neither cell gets it, no rho
    cells = _score(tmp_path, "old-two", two, [_probe(None, 0.5, "old")])
    for c in cells.values():
        assert c["rho"] is None
        assert "linear probe above its null at this site: no probe anchor at this site" in c["claim"]["not_measured"]
    # the same old anchor with one identity in the run set: attached, rho computed, the claim says by name
    cells = _score(tmp_path, "old-one", _rows(BF16, 6, 3), [_probe(None, 0.5, "old")])
    c = cells[("bfloat16", False)]
    assert c["rho"]["rho"] == pytest.approx(0.3 / 0.5)
    assert [h for h in c["claim"]["held"] if h.startswith("linear probe")] == [
        "linear probe above its null at this site: m_probe=+0.500 vs null 95th pct +0.100" + BY_NAME]


def test_the_markdown_names_the_weights_each_anchor_was_fitted_on():
    """owmi_score.md's anchor lines name an anchor's weights as the cells are named (identity label),
    so a reader sees which cells it can anchor; an old anchor says it attaches by name only."""
    from tamperbench.owmi.score.render import _anchor_weights

    who = identity.labels([identity.of(F32), identity.of(BF16)])
    assert _anchor_weights(_probe(BF16, 0.6, "bf16"), who) == "m @ rev-aaaaaaaa bfloat16"
    assert _anchor_weights(_probe(F32, 0.5, "f32"), who) == "m @ rev-aaaaaaaa float32"
    # an anchor whose weights no cell has (the GGUF): labelled on its own, quantized flag shown
    assert _anchor_weights(_probe(GGUF, 0.5, "q"), who) == "m @ rev-aaaaaaaa float32 (quantized)"
    assert _anchor_weights(_probe(None, 0.5, "old"), who) == \
        "m (no weights identity recorded: attaches by name, where one identity has it)"
