"""The tier-3 observer classifier (owmi/score/observer_classifier.py): which outputs train it, and the row it writes.

Why: the observer bound mu_obs (Section 3.4) is published beside d' and AUROC; a classifier that
trained on the item it scores, on another model's outputs, on observer or Track A rows, or that
kept an intervention run's JS or causal effect on the observer row, or that trained across cells
(another track, dose or operator), would move that bound. Expected probabilities come from
scikit-learn (TF-IDF unigrams+bigrams, logistic regression) fitted here on the training set chosen by
hand: the same cell's outputs of the other items (every cell here has at most five items, so the
GroupKFold cross-fit is leave-one-item-out); the row's fields are spelled out here. Pure: no model,
no files.
"""

from __future__ import annotations

import pytest
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from tamperbench.owmi.score.observer_classifier import NAME, PROBE, classifier_rows
from tamperbench.owmi.protocol.records import OwmiRun
from tamperbench.store import trial_key

# fields an intervention run carries that the observer row must not inherit (all set here, so a kept one shows)
INHERITED = dict(parse_error="x", confidence=0.7, js_mean=0.1, js_max=0.2, js_positions=3, delta_norm=1.5,
                 causal_effect=0.3, answer_logprob_base=-1.0, answer_logprob_altered=-2.0, random_norm=4.0,
                 rubric_flag=True, detected=True, graded=0.9, observer_model="none")


def _row(item, cond, output, *, track="B_delayed", model="m", family="detection", **kw):
    base = dict(key=f"{model}-{track}-{item}-{cond}-{family}", pair_id=f"p-{model}-{track}-{item}", cell_id="c",
                model=model, model_revision="r", dtype="float32", quantized=False, temperature=0.0, top_p=1.0,
                max_new_tokens=8, readout="generated", benchmark="b", domain="knowledge", item_id=item, item_provenance="{}",
                object_kind="resid_post", site="resid_post.1", layer=1, operator="add", dose=1.0, positions="task",
                when="prefill", seed=0, condition=cond, hook_scope="active", track=track, probe_family=family,
                probe_text="first-person probe", prompt_text="t", prompt_ids=[1, 2], intervened_positions=[5],
                task_output=output, response="{}", finish_reason="eos", parse_ok=False, **INHERITED)
    base.update(kw)
    return OwmiRun(**base).model_dump()


def _prob(train, text):
    """P(intervention | text) from a classifier fitted on ``train`` = [(output, label)] (scikit-learn)."""
    vec = TfidfVectorizer(ngram_range=(1, 2), min_df=1)
    clf = LogisticRegression(max_iter=1000).fit(vec.fit_transform([t for t, _ in train]), [y for _, y in train])
    return float(clf.predict_proba(vec.transform([text]))[0, 1])


BASE = [
    _row("i0", "intervention", "waves ocean sea water"), _row("i0", "sham", "Paris capital France"),
    _row("i1", "intervention", "ocean tide waves"), _row("i1", "sham", "capital city of France Paris"),
    _row("i2", "intervention", "sea water tide", track="B_visible"), _row("i2", "sham", "France Paris", track="B_visible"),
    _row("i9", "intervention", "sea tide", track="B_visible"), _row("i9", "sham", "Paris", track="B_visible"),
    _row("i3", "intervention", "water sea ocean", track="C", family="spontaneous"),
    _row("i3", "sham", "the capital Paris", track="C", family="spontaneous"),
    _row("i10", "intervention", "ocean", track="C", family="spontaneous"),
    _row("i10", "sham", "capital", track="C", family="spontaneous"),
]
# rows that must never train the classifier nor get an observer row of their own
NOISE = [
    _row("i4", "intervention", "Paris Paris France capital", track="A"),  # Track A has no task output to read
    _row("i4", "sham", "waves waves ocean", track="A"),
    _row("i5", "intervention", "Paris France capital", family="confidence"),  # not a detection/spontaneous run
    _row("i5", "sham", "waves ocean sea", family="confidence"),
    _row("i6", "intervention", "Paris France capital", model="other"),  # another model's outputs
    _row("i6", "sham", "ocean sea waves", model="other"),
    _row("i7", "random_matched", "Paris France capital"),  # not an intervention/sham run
    _row("i7", "observer", "ocean sea waves", observer_tier=1),
    _row("i8", "intervention", ""),  # empty task output: nothing to read
    _row("i8", "sham", None),
    _row("i11", "intervention", "Paris France capital", dose=2.0),  # another cell (dose): never trains this one
    _row("i11", "sham", "ocean sea waves", dose=2.0),
    _row("i12", "intervention", "Paris France capital", operator="scale"),  # another cell (operator)
    _row("i12", "sham", "ocean sea waves", operator="scale"),
]


def _train_for(item, model="m"):
    src = next(r for r in BASE if r["item_id"] == item)
    keep = [r for r in BASE + NOISE if r["model"] == model and r["item_id"] != item and r["task_output"]
            and r["track"] == src["track"] and r["probe_family"] == src["probe_family"] and r["dose"] == src["dose"]
            and r["operator"] == src["operator"] and r["condition"] in ("intervention", "sham")]
    return [(r["task_output"], int(r["condition"] == "intervention")) for r in keep]


def test_each_row_is_scored_by_a_classifier_that_never_saw_its_item():
    out = {r.pair_id: r for r in classifier_rows(BASE + NOISE)}
    # model "other" has outputs of item i6 only, and the dose-2 and scale cells one item each: nothing held out
    # to train on, so no row for them
    assert sorted(out) == ["p-m-B_delayed-i0", "p-m-B_delayed-i1", "p-m-B_visible-i2", "p-m-B_visible-i9",
                           "p-m-C-i10", "p-m-C-i3"]
    for r in BASE:
        if r["condition"] != "intervention":
            continue
        got = out[r["pair_id"]]
        want = _prob(_train_for(r["item_id"]), r["task_output"])
        assert got.graded == pytest.approx(want, abs=1e-12), r["item_id"]
        assert got.detected is (want >= 0.5) and got.response == f"{want:.6f}"


def test_observer_row_fields():
    rows = classifier_rows(BASE + NOISE)
    src = BASE[0]
    got = next(r for r in rows if r.pair_id == src["pair_id"]).model_dump()
    prob = _prob(_train_for("i0"), src["task_output"])
    want = {**src, "key": trial_key({"pair": src["pair_id"], "observer_tier": 3, "observer_model": "tfidf-logreg"}),
            "condition": "observer", "observer_tier": 3, "observer_model": "tfidf-logreg",
            "probe_text": "classifier: P(intervention | visible task output), fitted per cell, cross-fitted by item "
                          "(GroupKFold)",
            "prompt_text": "waves ocean sea water", "prompt_ids": [], "intervened_positions": [],
            "response": f"{prob:.6f}", "finish_reason": "classifier", "parse_ok": True, "parse_error": None,
            "detected": prob >= 0.5, "graded": pytest.approx(prob, abs=1e-12), "confidence": None, "js_mean": None,
            "js_max": None, "js_positions": None, "delta_norm": None, "causal_effect": None,
            "answer_logprob_base": None, "answer_logprob_altered": None, "random_norm": None, "rubric_flag": None}
    assert (NAME, PROBE) == ("tfidf-logreg", want["probe_text"])
    got.pop("created_at"), want.pop("created_at")
    assert got == want


def test_the_other_model_is_trained_on_its_own_outputs_only():
    other = [_row(f"o{i}", c, t, model="other") for i in range(2)
             for c, t in (("intervention", f"ocean sea {i}"), ("sham", f"Paris France {i}"))]
    out = {r.pair_id: r for r in classifier_rows(BASE + other)}
    for i in range(2):
        r = out[f"p-other-B_delayed-o{i}"]
        train = [(x["task_output"], int(x["condition"] == "intervention")) for x in other if x["item_id"] != f"o{i}"]
        assert r.graded == pytest.approx(_prob(train, f"ocean sea {i}"), abs=1e-12)


def test_an_output_with_no_known_word_scores_one_half_and_counts_as_detected():
    # mirror-image training outputs: the fitted intercept is 0 to rounding, so an output of unseen words scores
    # exactly 0.5 (scikit-learn), which is on the detected side of the >= 0.5 rule
    rows = [_row("a", "intervention", "aa x"), _row("a", "sham", "bb x"), _row("b", "intervention", "aa y"),
            _row("b", "sham", "bb y"), _row("c", "intervention", "qq"), _row("c", "sham", "rr")]
    assert _prob([("aa x", 1), ("bb x", 0), ("aa y", 1), ("bb y", 0)], "qq") == 0.5
    (r,) = [r for r in classifier_rows(rows) if r.item_id == "c"]
    assert r.graded == 0.5 and r.detected is True and r.response == "0.500000"


def test_stored_rows_are_not_redone_and_one_class_gives_no_row():
    out = classifier_rows(BASE)
    assert len(out) == 6
    again = classifier_rows(BASE + [x.model_dump() for x in out[:1]])
    assert sorted(r.pair_id for r in again) == sorted(r.pair_id for r in out[1:])
    shams_only = [r for r in BASE if r["condition"] == "sham"] + [BASE[0]]
    assert classifier_rows(shams_only) == []  # the training set of i0 holds shams only


def test_a_pair_without_training_data_does_not_stop_the_others():
    # model "other" comes first and has one item only (no row); model m's pairs after it are still scored
    lone = [_row("o0", "intervention", "ocean sea", model="other"), _row("o0", "sham", "Paris", model="other")]
    assert sorted(r.pair_id for r in classifier_rows(lone + BASE)) == sorted(r.pair_id for r in classifier_rows(BASE))


def test_observer_row_gets_its_own_creation_time_and_needs_none_stored():
    old = {**BASE[0], "created_at": "2000-01-01T00:00:00+00:00"}
    (row,) = [r for r in classifier_rows([old, *BASE[1:]]) if r.pair_id == old["pair_id"]]
    assert row.created_at > "2001"  # a fresh time, not the intervention run's
    bare = [{k: v for k, v in r.items() if k != "created_at"} for r in BASE]  # rows written by another tool
    assert len(classifier_rows(bare)) == 6
