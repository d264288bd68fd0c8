"""Model-level results of ``owmi score`` are keyed by the model identity (model, revision, dtype,
quantized), never by the model name alone (owmi/score/identity.py, profile._model_level).

Why: one model name run at float32 and bfloat16, at two revisions, or as a dequantized GGUF beside
its full-precision weights is two sets of weights at two precisions; Appendix D.4 never pools them.
Keyed by name, their variance pairs were pooled into one entry and their decay verdicts counted on
one claim line, so a precision change read as a property of the model. Each run set below holds two
identities of one name; every expected number is worked out from how the copy was made: the copy's
graded scores are the original's times k, so each pair's margin s = g_int - g_sham is k times the
original's and every variance component k^2 times (the moment estimator is quadratic in s), while
the ICCs and their item-bootstrap intervals (same items, same seed) do not move. A score of the
original alone gives the original's entry, so an entry that saw the other identity's pairs differs.
Real DuckDB run directories through the real RunStore; no model.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tamperbench.owmi.score import identity
from tamperbench.owmi.score.claims import structure_claim
from tamperbench.owmi.score.profile import score_runs
from tamperbench.owmi.score.render import to_markdown
from tamperbench.owmi.protocol.records import RUNS_TABLE, OwmiRun
from tamperbench.store import RunStore
from tamperbench.store.run_store import trial_key

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_owmi_profile_bite import REV, _records, _Spec  # noqa: E402

N_BOOT = 5
REV_C = "rev" + "m" * 11 + "other"  # shares its first 14 characters with REV["m"] ("rev" + 18 m)
NOT_EST = "needs >= 2 domains, >= 2 objects and >= 8 complete pairs"
DECAY_NA = "temporal decay (Eq. 19, D.5): not estimable in {n} of {n} cells"  # Track A only: no Eq. 19 contrast


def _m() -> list[OwmiRun]:
    """m's records: float32, full precision, resid_post.3 and resid_post.5, 12 pairs each, 2 domains."""
    return [r for r in _records()[:-2] if r.model == "m"]


def _copy(recs, tag: str, k: float, **update) -> list[OwmiRun]:
    """The same design points under other weights: graded times k, sham reports flipped (so d' moves too)."""
    return [r.model_copy(update={"key": trial_key([r.key, tag]), "graded": round(k * r.graded, 6),
                                 "detected": (not r.detected) if r.condition == "sham" else r.detected, **update})
            for r in recs]


def _score(tmp: Path, name: str, recs: list[OwmiRun], model: str = "m") -> dict:
    store = RunStore.open(tmp / name, _Spec(name=name))
    store.ensure_table(RUNS_TABLE, OwmiRun)
    store.write(RUNS_TABLE, [r.model_copy(update={"model": model}) for r in recs])
    store.close()
    return score_runs([tmp / name], n_boot=N_BOOT, dose_boot=0)


@pytest.fixture
def alone(tmp_path):
    """The variance entry of m's original records scored on their own (one identity)."""
    return _score(tmp_path, "alone", _m())["variance"]["m"]


def _two(tmp: Path, which: str) -> dict:
    """m beside one copy of itself under other weights. Each test scores its own run set (not one
    module fixture): mutmut charges a module fixture's calls to the first test that uses it."""
    m = _m()
    copy = {"dtypes": lambda: _copy(m, "bf16", 2.0, dtype="bfloat16"),
            "revisions": lambda: _copy([r for r in m if r.site == "resid_post.3"], "c", 1.0, model_revision=REV_C),
            "quantized": lambda: _copy(m, "gguf", 3.0, quantized=True)}[which]()
    return _score(tmp, which, m + copy)


def _entry(rev=REV["m"], dtype="float32", q=False) -> dict:
    """A model-level entry's fields: the identity and its read-out."""
    return {**_fields(rev, dtype, q), "readout": "generated"}


def _fields(rev=REV["m"], dtype="float32", q=False) -> dict:
    return {"model": "m", "model_revision": rev, "dtype": dtype, "quantized": q}


def _stats(entry: dict) -> dict:
    return {k: v for k, v in entry.items() if k not in identity.FIELDS + ("label",)}


def _scaled(entry: dict, k: float, alone: dict) -> None:
    """``entry`` is what the original's pairs (``alone``) give with every margin times k (module docstring)."""
    base = _stats(alone)
    assert entry["estimable"] is True and entry["pairs"] == entry["n"] == 24
    assert entry["sigma2"] == pytest.approx({f: k * k * v for f, v in base["sigma2"].items()}, rel=1e-9, abs=1e-12)
    for part in ("icc", "delta"):
        for f, v in base[part].items():
            assert entry[part][f]["estimate"] == pytest.approx(v["estimate"], abs=1e-9)
            assert entry[part][f]["ci"] == pytest.approx(v["ci"], abs=1e-9)


def test_one_identity_keeps_its_name_as_key_and_gains_its_fields(tmp_path):
    result = _score(tmp_path, "alone", _m())
    got = result["variance"]
    assert list(got) == ["m"]  # a single-identity run keeps the key it had before identities
    assert {k: got["m"][k] for k in (*identity.FIELDS, "label")} == {**_fields(), "label": "m @ revmmmmmmmmm float32"}
    assert got["m"]["estimable"] is True and got["m"]["pairs"] == 24
    assert result["model_claims"] == [{**_entry(), "label": "m @ revmmmmmmmmm float32",
                                              "structure": structure_claim(got["m"]), "decay": DECAY_NA.format(n=2)}]


def test_two_dtypes_of_one_name_are_two_entries_and_two_claim_lines(tmp_path, alone):
    result = _two(tmp_path, "dtypes")
    got = result["variance"]
    f32, bf16 = "m @ revmmmmmmmmm float32", "m @ revmmmmmmmmm bfloat16"
    assert list(got) == [bf16, f32]
    assert got[f32] == {**alone, "label": f32}  # the float32 entry saw the float32 pairs only
    assert {k: got[bf16][k] for k in identity.FIELDS} == _fields(dtype="bfloat16")
    _scaled(got[bf16], 2.0, alone)
    assert result["model_claims"] == [
        {**_entry(dtype="bfloat16"), "label": bf16, "structure": structure_claim(got[bf16]),
         "decay": DECAY_NA.format(n=2)},
        {**_entry(), "label": f32, "structure": structure_claim(got[f32]), "decay": DECAY_NA.format(n=2)}]
    md = to_markdown(result)
    for label in (bf16, f32):
        assert md.count(f"- **{label}** (model level): ") == 1
        assert sum(line.startswith(f"- {label}: ICC_") for line in md.splitlines()) == 1
    # the detection table names the identity on every row: two rows per cell, never two alike
    rows = [line for line in md.splitlines() if line.startswith("| m @ ") and "| 12 |" in line]
    assert len(rows) == 4 and len({line.split(" | ")[0] + line.split(" | ")[1] for line in rows}) == 4


def test_two_revisions_of_one_name_are_two_entries_with_revisions_told_apart(tmp_path, alone):
    result = _two(tmp_path, "revisions")
    got = result["variance"]
    a, c = "m @ revmmmmmmmmmmmm float32", "m @ revmmmmmmmmmmmo float32"  # 15 characters: the first 14 agree
    assert list(got) == [a, c]
    assert got[a] == {**alone, "label": a}
    assert got[c] == {**_entry(rev=REV_C), "label": c, "estimable": False, "pairs": 12, "reason": NOT_EST}
    assert result["model_claims"] == [
        {**_entry(), "label": a, "structure": structure_claim(alone), "decay": DECAY_NA.format(n=2)},
        {**_entry(rev=REV_C), "label": c, "structure": f"domain/object structure: not assessable ({NOT_EST})",
         "decay": DECAY_NA.format(n=1)}]
    # the per-weights pools show the same 15 characters (12 would print one label twice)
    assert [p["pool"] for p in result["pooled"]] == [
        "m [revmmmmmmmmmmmm, float32] all detection cells", "m [revmmmmmmmmmmmo, float32] all detection cells",
        "all models [float32, full precision]"]


def test_a_dequantized_gguf_at_float32_is_not_the_float32_weights(tmp_path, alone):
    result = _two(tmp_path, "quantized")
    got = result["variance"]
    f32, q = "m @ revmmmmmmmmm float32", "m @ revmmmmmmmmm float32 (quantized)"
    assert list(got) == [f32, q]
    assert got[f32] == {**alone, "label": f32}
    assert {k: got[q][k] for k in identity.FIELDS} == _fields(q=True)
    _scaled(got[q], 3.0, alone)
    assert [(m["label"], m["decay"]) for m in result["model_claims"]] == [(f32, DECAY_NA.format(n=2)),
                                                                        (q, DECAY_NA.format(n=2))]
    det = [c["cell"] for c in result["cells"] if c["cell"]["probe_family"] == "detection"]
    assert [(c["site"], c["quantized"]) for c in det] == [("resid_post.3", False), ("resid_post.5", False),
                                                           ("resid_post.3", True), ("resid_post.5", True)]
    assert {c["cell"]["quantized"] for c in result["decay"]["cells"]} == {False, True}


def test_an_identity_without_a_complete_pair_has_a_claim_line_but_no_variance_entry(tmp_path, alone):
    """bfloat16 runs whose sham reports all failed to parse: no complete pair, so no variance entry, yet
    their decay cells exist (intervention and sham rows) and their claim line says so, beside float32's."""
    m = _m()
    unparsed = [r.model_copy(update={"parse_ok": False, "detected": None, "graded": None})
                if r.condition == "sham" else r for r in _copy(m, "bf16", 1.0, dtype="bfloat16")]
    result = _score(tmp_path, "unparsed", m + unparsed)
    f32, bf16 = "m @ revmmmmmmmmm float32", "m @ revmmmmmmmmm bfloat16"
    assert result["variance"] == {f32: {**alone, "label": f32}}
    assert result["model_claims"] == [
        {**_entry(), "label": f32, "structure": structure_claim(alone), "decay": DECAY_NA.format(n=2)},
        {**_entry(dtype="bfloat16"), "label": bf16, "structure": "domain/object structure: not assessable (no estimate)",
         "decay": DECAY_NA.format(n=2)}]


# -- the labels and keys themselves ----------------------------------------------------------------------------


def test_identity_of_a_row_reads_a_missing_quantized_flag_as_full_precision():
    row = {"model": "m", "model_revision": "r", "dtype": "float32"}
    assert identity.of(row) == ("m", "r", "float32", False)
    assert identity.of({**row, "quantized": 1}) == ("m", "r", "float32", True)
    assert identity.value(row, "quantized") is False and identity.value(row, "dtype") == "float32"
    assert identity.fields(("m", "r", "float32", True)) == {"model": "m", "model_revision": "r", "dtype": "float32",
                                                            "quantized": True}


def test_revision_prefix_grows_only_where_two_revisions_share_twelve_characters():
    assert identity.rev_chars([]) == identity.rev_chars(["r", "r2"]) == identity.rev_chars(["a" * 40]) == 12
    assert identity.rev_chars(["abcdefghijklX", "abcdefghijklY"]) == 13
    assert identity.rev_chars(["a" * 20, "a" * 19 + "b", "a" * 20]) == 20


def test_hostile_names_never_share_a_label_or_a_key():
    # a dtype string that spells the quantized suffix: same base label, so the later one is numbered
    a, b = ("a", "r", "float32", True), ("a", "r", "float32 (quantized)", False)
    assert identity.labels([b, a, a]) == {a: "a @ r float32 (quantized)", b: "a @ r float32 (quantized) #2"}
    # a name that equals another identity's label: that name gives up the bare-name key for its own label
    x, y, z = ("m @ r float32", "x", "float16", False), ("m", "r", "float32", False), ("m", "r2", "float32", False)
    assert identity.keys([x, y, z]) == {y: "m @ r float32", z: "m @ r2 float32", x: "m @ r float32 @ x float16"}
    assert identity.keys([x, ("other", "r", "float32", False)]) == {x: "m @ r float32",
                                                                   ("other", "r", "float32", False): "other"}


def test_labels_sort_identities_whose_revision_is_missing():
    """A hand-written cell without a revision gives None beside strings: the labels still sort (by
    text), where a plain tuple sort would raise TypeError comparing None with a string."""
    a, b = ("m", None, "float32", False), ("m", "r", "float32", False)
    assert identity.labels([b, a]) == {a: "m @ None float32", b: "m @ r float32"}
    assert identity.keys([b, a]) == {a: "m @ None float32", b: "m @ r float32"}
    c = ("m", "r", "float32 (quantized)", False)  # the numbered label goes to the later one in text order
    assert identity.labels([c, ("m", None, "float32", True), ("m", "r", "float32", True)])[c] == \
        "m @ r float32 (quantized) #2"


def test_result_labels_read_the_cells_and_the_decay_cells_together():
    """An identity with only non-detection rows has cells but no decay cell, and the reverse can hold
    for hand-written results: the labels cover both, and the revision prefix is chosen over both."""
    f = ("model", "model_revision", "dtype", "quantized")
    a, b = ("m", "rev" + "x" * 12 + "1", "float32", False), ("m", "rev" + "x" * 12 + "2", "bfloat16", True)
    result = {"cells": [{"cell": dict(zip(f, a))}], "decay": {"cells": [{"cell": dict(zip(f, b))}]}}
    assert identity.result_labels(result) == {a: "m @ rev" + "x" * 12 + "1 float32",
                                              b: "m @ rev" + "x" * 12 + "2 bfloat16 (quantized)"}
    assert identity.result_labels({"cells": [{"cell": dict(zip(f, a))}]}) == {a: "m @ revxxxxxxxxx float32"}
    assert identity.result_labels({"decay": None, "cells": None}) == {}
