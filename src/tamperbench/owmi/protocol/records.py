"""Stored OWMI records: one row per (cell, item, seed, scope, track, probe, condition) run.

Why one flat table (``owmi_runs``): every estimator of Appendices C-D (paired d'/AUROC against
sham, the random and observer margins, parse rates per cell and condition, the dose-response fit)
is a GROUP BY over the same run rows joined on ``pair_id``. A flat typed table keeps those joins
one line of SQL (DuckDB) or pandas, for the stats helper and for anyone rerunning the numbers.

Pairing. ``pair_id`` is the hash of everything a pair shares (model, benchmark, item, object,
operator, dose, probe, track, scope, seed, read-out) and nothing the conditions differ in. The conditions
``intervention``, ``sham``, ``random_unit``, ``random_matched`` and ``observer`` of one pair share
it; a pair is *complete* for a contrast when both of its rows exist and parsed.

Appendix D exclusion rule ("runs with an unrecorded model revision, decoding specification, probe
text, condition, site, dose, seed, or hook scope do not enter the analysis") is
:func:`missing_required`: analysis code calls :func:`analysable` and never reads a run that
fails it.
"""

from __future__ import annotations

from typing import Any, Literal

from tamperbench.store import Record

RUNS_TABLE = "owmi_runs"
CALIBRATION_TABLE = "owmi_calibration"

Condition = Literal["intervention", "sham", "random_unit", "random_matched", "observer"]
CONDITIONS: tuple[Condition, ...] = ("intervention", "sham", "random_unit", "random_matched", "observer")
Track = Literal["A", "B_visible", "B_masked", "B_delayed", "C"]
TRACKS: tuple[str, ...] = ("A", "B_visible", "B_masked", "B_delayed", "C")
Scope = Literal["active", "lifted"]
Readout = Literal["generated", "constrained", "choice"]
READOUTS: tuple[str, ...] = ("generated", "constrained", "choice")
ProbeFamily = Literal["detection", "confidence", "localization", "characterization", "reconstruction",
                      "spontaneous"]


class OwmiRun(Record):
    """One measurement run (Appendix C.1: cell c = (m, b, o, a, q, t), item i, seed r, scope h,
    condition k). Fields marked *required* are checked by :func:`missing_required`."""

    suite: str = "owmi"
    pair_id: str  # required: joins the conditions of one paired measurement
    cell_id: str  # hash of (model, benchmark, object, operator, dose, probe, track, read-out): the analysis cell
    # -- model and decoding (required) ------------------------------------------------
    model: str  # model spec as given
    model_revision: str  # provenance id (sha256 of the weights) or hub revision
    dtype: str  # never pool quantized and full-precision runs
    quantized: bool
    temperature: float
    top_p: float
    max_new_tokens: int  # the probe answer's budget; 0 under the choice read-out (nothing decoded)
    readout: Readout  # required: generated | constrained | choice; part of the cell and pair keys (never pooled)
    readout_detail: str | None = None  # JSON: choice's forced prefix, options and scoring; constrained's grammar
    # and library version
    # -- item -----------------------------------------------------------------------------
    benchmark: str
    domain: str
    item_id: str
    item_provenance: str  # JSON of the item's provenance (dataset, split, original id, sha256)
    gold_answer: str | None = None
    # -- object, operator, dose (required) ----------------------------------------------
    object_kind: str  # resid_pre | resid_post | attn_out | mlp_out | head | sae_feature
    site: str  # e.g. 'resid_post.12', 'head_out.5:h3', 'resid_post.8:sae#17'
    layer: int
    head: int | None = None
    sae_feature: int | None = None
    sae_path: str | None = None
    operator: str  # zero | scale | noise | replace | add
    dose: float  # the operator's strength parameter as set by the experimenter
    positions: str  # declared token positions ('task', 'all', 'last', or 'i,j,k')
    when: str  # 'prefill' or 'every_step'
    concept: str | None = None  # ground-truth concept label of an injected direction (reconstruction)
    seed: int
    # -- design factors (required) ------------------------------------------------------
    condition: Condition
    hook_scope: Scope
    track: Track
    probe_family: ProbeFamily
    probe_text: str  # the exact probe wording put to the model (first person; observer: third person)
    observer_tier: int | None = None  # 1 same model zero-shot, 2 another model spec, 3 classifier
    observer_model: str | None = None
    observer_revision: str | None = None  # tier 2: the observer's own weights (model_revision stays the subject's,
    # so all tiers of a cell share its key and mu_obs of Eq. 8 takes the max over them)
    # -- what the model saw and said -----------------------------------------------------
    prompt_text: str  # exact text of the probe context (chat template applied)
    system_prompt: str | None = None  # the system message given (None: none given, so the chat template's
    # default, if any, is what prompt_text shows): Track C runs without the introspection prompt by default
    prompt_ids: list[int]
    intervened_positions: list[int]  # absolute token indices the hook altered (empty for sham/observer)
    task_output: str | None = None  # the model's task answer (tracks B/C), '' for track A
    task_correct: float | None = None  # score of the task answer under the item's scoring rule
    response: str  # the probe answer as generated
    finish_reason: str
    # -- parsed probe answer (never imputed) -----------------------------------------------
    parse_ok: bool
    parse_error: str | None = None
    detected: bool | None = None  # detection: yes/no
    graded: float | None = None  # detection: graded score in [0, 1]
    confidence: float | None = None  # confidence in [0, 1]
    layer_report: int | None = None  # localization
    category_report: str | None = None  # characterization
    concept_report: str | None = None  # reconstruction
    rubric_flag: bool | None = None  # track C: condition-blinded rubric says "anomaly volunteered"
    # -- token-level read-out (readout 'choice'; C.7: never mixed with the verbal fields above) ------
    choice_g: float | None = None  # detection/confidence: P(yes) / (P(yes) + P(no)) after the forced prefix
    choice_logprobs: str | None = None  # JSON {option: summed log-probability} over the closed option set
    choice_mass: float | None = None  # P of every option (variants summed) after the forced prefix
    choice_scorable: bool | None = None  # choice_mass >= choice.MIN_OPTION_MASS (else parse_ok False: unscorable)
    # -- truth for scoring ----------------------------------------------------------------
    true_category: str | None = None  # the closed-set category of what was altered
    corrupted: bool | None = False  # malformed / degenerate generation: an outcome, never evidence
    # (None: not measurable -- the choice read-out decodes nothing)
    # -- intervention effect ---------------------------------------------------------------
    js_mean: float | None = None  # teacher-forced JS divergence from baseline, mean over positions
    js_max: float | None = None
    js_positions: int | None = None
    delta_norm: float | None = None  # mean L2 norm of the activation change at declared positions
    random_norm: float | None = None  # random conditions: norm of the injected direction
    match_target_js: float | None = None  # random_matched: the treatment's mean JS
    match_achieved_js: float | None = None  # random_matched: the mean JS the calibrated norm gave
    causal_effect: float | None = None  # patching effect on the task answer's log-prob (nats)
    answer_logprob_base: float | None = None
    answer_logprob_altered: float | None = None
    seconds: float = 0.0


class OwmiCalibration(Record):
    """One impact-matching calibration (Appendix C.2, Eq. 7): bisection over the random norm."""

    model: str
    site: str
    operator: str
    dose: float
    seed: int
    item_id: str
    target_js: float
    achieved_js: float
    eta: float
    iterations: int
    trace: list[list[float]]  # (eta, mean JS) at every bisection step
    path: str = "sequential"  # how E[D(eta)] was computed: 'sequential' (one forward per unit) or 'batched'
    # (the cell's units as rows of one ragged forward); equal to float rounding, not bitwise
    system_prompt: str | None = None  # the system message of the units' task context (None: none given)


REQUIRED: tuple[str, ...] = (
    "pair_id", "model", "model_revision", "dtype", "temperature", "top_p", "max_new_tokens", "readout", "item_id",
    "site", "operator", "dose", "seed", "condition", "hook_scope", "track", "probe_family", "probe_text",
    "prompt_text",
)


def missing_required(row: dict[str, Any]) -> list[str]:
    """Appendix D.4: the fields a run must record to enter analysis; empty list = analysable."""
    return [f for f in REQUIRED if row.get(f) is None or row.get(f) == ""]


def analysable(row: dict[str, Any]) -> bool:
    return not missing_required(row)
