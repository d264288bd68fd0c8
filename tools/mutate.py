"""Mutation score of the modules that turn records into published numbers (`make mutate`).

WHY: a green suite only counts if breaking the code turns it red. mutmut makes one small change
("mutant") at a time in each module listed under ``[tool.mutmut] only_mutate`` in pyproject.toml,
runs the fast suite (``pytest -m "not model and not browser"``, only the tests that reach the mutated
function) against it, and records whether some test failed ("killed"). This script drives mutmut
and prints, per module, killed / (mutants - known equivalents) as a percentage.

Usage (from the repository root):

    .venv/bin/python tools/mutate.py                                   # every configured module
    .venv/bin/python tools/mutate.py src/tamperbench/judge/parse.py    # one or more modules
    .venv/bin/python tools/mutate.py --report-only                     # re-print the last run
    .venv/bin/python tools/mutate.py --show src/tamperbench/judge/parse.py   # diffs of survivors

mutmut copies the tree to ``./mutants`` (git-ignored). By default this script deletes it first so a
score is never read from a stale copy of the source or tests; ``--keep`` reuses it. Timeouts count
as killed (the mutant made a test hang, which a run would notice); they are shown separately.
Too slow for CI (the full set is thousands of mutants): run it by hand.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Mutants that cannot change any observable result. Each entry: (module path, function name as
# mutmut mangles it (``x_<name>`` or ``xǁClassǁmethod``), a substring of the mutated ``+`` line, and why
# it is equivalent). Matching on the diff text, not the mutant number, keeps the list valid when the
# module is edited and mutmut renumbers its mutants.
EQUIVALENT: list[tuple[str, str, str, str]] = [
    ("src/tamperbench/judge/jury.py", "x_judge_items", "zip(items, prompts, first, parsed,",
     "a judge returning too few generations raises ValueError at the other strict zip over first and items"),
    ("src/tamperbench/judge/jury.py", "x_judge_items", "zip(first, items,",
     "a judge returning too few generations raises ValueError at the later strict zip over items and first"),
    ("src/tamperbench/stats/agreement.py", "x_cohen_kappa", 'warnings.simplefilter("ignore", ',
     "changes only which warnings are silenced, not the value"),
    ("src/tamperbench/stats/agreement.py", "x_percent_agreement", "zip(a, b,",
     "the lengths were compared just above"),
    ("src/tamperbench/judge/agreement.py", "x_compute_agreement", "zip(LABELS, vals,",
     "vals are the LABELS columns of a SELECT that lists exactly LABELS: always the same length"),
    ("src/tamperbench/judge/parse.py", "x__load_object", "lambda s: None",
     "the next attempt (JSON after repair) reads every valid JSON object the same way"),
    ("src/tamperbench/judge/parse.py", "x__load_object", "json.loads(None)",
     "the next attempt (JSON after repair) reads every valid JSON object the same way"),
    ("src/tamperbench/judge/parse.py", "x__match_brace", 'quote = ""',
     "'' and None are both falsy: the only use is `if quote:`"),
    ("src/tamperbench/store/run_store.py", "xǁRunStoreǁreplace", "'XXXX'}",
     "DELETE FROM t XXXX: DuckDB reads the word as a table alias, every row is still deleted"),
    ("src/tamperbench/store/lock.py", "x_move_aside", "dt.datetime.now(None)",
     "this machine's local time zone is UTC"),
    ("src/tamperbench/judge/delimit.py", "x_fence_nonce", '.encode("UTF-8",',
     "codec names are case-insensitive"),
    ("src/tamperbench/judge/delimit.py", "x_tokenizer_special_tokens", '"all_special_tokens", None)',
     "a missing attribute gives None instead of []; `or []` makes both the empty list"),
    ("src/tamperbench/judge/delimit.py", "x_tokenizer_special_tokens", '"special", None)',
     "a missing .special gives None instead of False: both falsy"),
    ("src/tamperbench/stats/agreement.py", "x_fleiss_kappa", "np.asarray(counts, dtype=None)",
     "integer count tables give the same kappa (every ratio below is true division)"),
    ("src/tamperbench/stats/agreement.py", "x_fleiss_kappa", "np.asarray(counts, )",
     "integer count tables give the same kappa (every ratio below is true division)"),
    ("src/tamperbench/stats/agreement.py", "x_fleiss_kappa_from_ratings", "dtype=None)",
     "np.zeros defaults to float64"),
    ("src/tamperbench/stats/agreement.py", "x_fleiss_kappa_from_ratings", "2)), )",
     "np.zeros defaults to float64"),
    ("src/tamperbench/stats/agreement.py", "x_fleiss_kappa_from_ratings", "max(len(categories), 3)",
     "an extra all-zero category column changes neither P_i nor P_e"),
    ("src/tamperbench/sleight/detector.py", "x__glues", "ch[:2].isalpha()",
     "every caller passes one character (core[len(t)], before, after[:1]), so ch[:2] == ch[:1]"),
    ("src/tamperbench/sleight/detector.py", "x__glues", "ch[:2] == \"'\"",
     "every caller passes one character (core[len(t)], before, after[:1]), so ch[:2] == ch[:1]"),
    ("src/tamperbench/sleight/detector.py", "x_case_like", 'rules: str = "XXreferenceXX"',
     "the default is only compared with \"appendix-c\": any other default string behaves the same"),
    ("src/tamperbench/sleight/detector.py", "x_case_like", 'rules: str = "REFERENCE"',
     "the default is only compared with \"appendix-c\": any other default string behaves the same"),
    ("src/tamperbench/sleight/detector.py", "xǁTriggerDetectorǁ__init__", '"all_special_ids", None) or []',
     "a missing attribute gives None instead of []; `or []` makes both the empty list"),
    ("src/tamperbench/sleight/summary.py", "x_judge_setup", "store.has_table(JUDGE_PARSE_RATES_TABLE) or configs",
     "store.rows gives [] for a missing table and DuckDB's `IN ()` selects no row: the guard only saves a query"),
    ("src/tamperbench/sleight/summary.py", "x_summarize", 't["_sig"][f"delta_{s}"]) for t in touched), seed=seed)',
     "model_estimate's default rule is \"reference\": dropping the argument changes nothing"),
    ("src/tamperbench/sleight/summary.py", "x__split_block", 't["_sig"]["delta_surprisal"]) for t in touched), seed=seed)',
     "model_estimate's default rule is \"reference\": dropping the argument changes nothing"),
    ("src/tamperbench/sleight/summary.py", "x_summarize", "if (group) or True else None",
     "every model group holds at least one trial (groups are built from the trials), so `if group` is always true"),
    ("src/tamperbench/sleight/summary.py", "x_load_rows", 'verdicts.get(t["key"], None)',
     "the LEFT JOIN from the trials table gives every trial key a row: the default is never used"),
    ("src/tamperbench/sleight/summary.py", "x_load_rows", 'verdicts.get(t["key"], )',
     "the LEFT JOIN from the trials table gives every trial key a row: the default is never used"),
    ("src/tamperbench/quote/taxonomy.py", "x_paper_class", 'sub_label or "XXXX"',
     "no (class, sub-label) key has an empty or 'XXXX' sub-label: a missing sub-label misses either way"),
    ("src/tamperbench/sleight/paper_layout.py", "x_order", "else -2.0)",
     "any negative stand-in sorts an unjudged model after every rate (all >= 0), keeping input order among them"),
    ("src/tamperbench/sleight/detector.py", "xǁTriggerDetectorǁ__init__", "len(low) >= len(t) and low.startswith(t)",
     "a token whose text equals a trigger was taken as a whole word just above (`continue`): equal lengths never get here"),
    ("src/tamperbench/sleight/detector.py", "xǁTriggerDetectorǁ__init__", "len(low) >= len(t) and low.endswith(t)",
     "a token whose text equals a trigger was taken as a whole word above (`continue`): equal lengths never get here"),
    ("src/tamperbench/quote/tables.py", "x_render", "add_column(col, overflow=None)",
     "rich (15.0.0, constraints.txt) wraps a column whose overflow is None with its default, fold: the same output"),
    ("src/tamperbench/quote/tables.py", "x_write_tables", "ensure_ascii=None)",
     "json.dumps only tests ensure_ascii for truth: None writes the same text as False"),
    ("src/tamperbench/quote/scorer.py", "x__locate", "if doc.rfind(answer) >= 0:",
     "rfind finds a substring exactly when find does; the offsets below come from find"),
    ("src/tamperbench/quote/scorer.py", "x__locate", 'doc.count("\\n", None, start)',
     "str.count reads a start of None as 0"),
    ("src/tamperbench/quote/tables.py", "x__is_faithful", 'paper_class(r["category"], None)',
     "no sub-label maps a class to the paper's faithful: only faithful and faithful_normalized do, whatever the sub-label"),
    ("src/tamperbench/quote/tables.py", "x_pooled_rates", 'taxonomy: str = "XXoursXX"',
     "the default is only compared with \"paper\" (summarise always passes it)"),
    ("src/tamperbench/quote/tables.py", "x_pooled_rates", 'taxonomy: str = "OURS"',
     "the default is only compared with \"paper\" (summarise always passes it)"),
    ("src/tamperbench/quote/tables.py", "x_summarise", ".most_common(None)",
     "only the first (most common) entry is read"),
    ("src/tamperbench/quote/tables.py", "x_summarise", ".most_common(2)",
     "only the first entry is read, and most_common(n) is sorted(..., reverse=True)[:n] (stable): same first entry"),
    ("src/tamperbench/quote/tables.py", "x_to_markdown", 'h["most_common"] or "XX-XX"',
     "hardest_items keeps only items with failures, whose most_common is never None"),
    ("src/tamperbench/quote/tables.py", "x_render", 'h["most_common"] or "XX-XX"',
     "hardest_items keeps only items with failures, whose most_common is never None"),
]

# stats, each checked by reading the code path the mutant changes.
_S = "src/tamperbench/stats/"
_NUMERIC = "numeric or boolean input (every caller) gives the same sums, means and orderings without the float cast"
EQUIVALENT += [(_S + mod, fn, f"np.asarray({arg}, {rest}", _NUMERIC)
               for mod, fn, args in [("sdt.py", "x_dprime", "y_int y_sham"), ("sdt.py", "x_auroc", "g_int g_sham"),
                                     ("sdt.py", "x_weighted_auroc", "g_int g_sham w_int w_sham"), ("sdt.py", "x_corrected_rate", "k n"),
                                     ("bootstrap.py", "x_detection_bootstrap", "y_int y_sham g_int g_sham"),
                                     ("bootstrap.py", "x_detection_bootstrap_loop", "y_int y_sham g_int g_sham"),
                                     ("bootstrap.py", "x_mean_bootstrap", "values")]
               for arg in args.split() for rest in ("dtype=None)", ")")]
_BRIER = "for 0/1 outcomes scikit-learn's brier_score_loss and the mean square are the same number: which runs cannot matter"
EQUIVALENT += [(_S + "calibration.py", "x_brier", n, _BRIER) for n in (
    "if (len(set(y)) > 1) and False", "if (len(set(y)) > 1) or True", "pos_label=None)", "p, ))", "y.astype(None)",
    "len(set(y)) >= 1", "len(set(y)) > 2")]
_CHUNK = ("chunking bounds memory only: the index matrix is drawn row by row from one stream, so any chunk size gives "
          "the same replicates (tested at 7, 10, 256)")
_ZERO_N = "at n = 0 the other division is masked to NaN, so the corrected rate is NaN either way"
_EMPTY = "a zero denominator has a zero numerator (an empty side): 0/0 is NaN either way"
EQUIVALENT += [
    (_S + "sdt.py", "x_dprime", "if yi.size == 0 and ys.size == 0", "an empty side has N = 0, whose corrected rate is NaN"),
    (_S + "sdt.py", "x_auroc", "if g_int.size == 0 and g_sham.size == 0", "an empty side has zero weight: NaN either way"),
    (_S + "sdt.py", "x_auroc", "np.ones((2, g_", "a second identical weight row only broadcasts: row [0] is the same AUROC"),
    (_S + "sdt.py", "x_corrected_rate", "np.nan), )", _ZERO_N),
    (_S + "sdt.py", "x_corrected_rate", "where=n >= 0)", _ZERO_N),
    (_S + "sdt.py", "x_corrected_rate", "half = np.divide(0.5, n, out=None", "half is read only where 0 < n"),
    (_S + "sdt.py", "x_corrected_rate", "half = np.divide(0.5, n, where=n > 0)", "half is read only where 0 < n"),
    (_S + "sdt.py", "x_level_auroc", "np.nan), )", _EMPTY),
    (_S + "sdt.py", "x_weighted_auroc", "np.nan), )", _EMPTY),
    (_S + "sdt.py", "x_weighted_auroc", "where=den >= 0)", _EMPTY),
    *[(_S + "sdt.py", "x_weighted_auroc", n, "searchsorted cuts the sorted sham scores only between distinct values: "
       "the order inside a run of ties never reaches a cumulative sum") for n in ("kind=None)", "np.argsort(g_sham, )",
                                                                              'kind="STABLE"')],
    (_S + "sdt.py", "x_weighted_auroc", "lo = np.searchsorted(sorted_sham, g_int, )", 'side="left" is the default'),
    (_S + "sdt.py", "x_level_auroc", "where=den >= 0)", _EMPTY),
    *[(_S + "variance.py", "x__pairs_same", n, "the level key stays injective (a mixed-radix number with a wider radix "
       "or negative digits), and float64 holds these small integers exactly") for n in
      ("np.zeros(codes[0].size, dtype=None)", "np.zeros(codes[0].size, )", "+ 1) - c", "+ 2) + c", ".astype(None)")],
    (_S + "variance.py", "x_variance_components", "if (g == s) and False else",
     "_pairs_same(codes[s], codes[s]) is same[s]: the shortcut only saves time"),
    (_S + "variance.py", "x_variance_components", "np.asarray(rhs), )", "numpy >= 2 defaults rcond to None"),
    (_S + "variance.py", "x_icc_contrasts", "n_boot >= 0 and", "n_boot = 0 runs the loop zero times: NaN intervals either way"),
    (_S + "variance.py", "x_icc_contrasts", "y.size >= 1:", "one observation has NaN components, so every replicate is NaN"),
    (_S + "variance.py", "x_icc_contrasts", "copy.astype(None)", "integer item copies become floats, still one label each"),
    *[(_S + "variance.py", fn, f"np.asarray({a}, {r}", _NUMERIC) for fn, a in
      (("x_variance_components", "y_in"), ("x_icc_contrasts", "y"), ("x_icc_contrasts", "v")) for r in ("dtype=None)", ")")],
    (_S + "intervals.py", "x_wilson", "min(2.0, float(hi))",
     "for k < n the Wilson upper end is below 1 (k == n returned 1.0 first): a clip above 1 never binds"),
    (_S + "multiple.py", "x_benjamini_hochberg", 'method="FDR_BH"', "statsmodels lowercases the method name"),
    (_S + "calibration.py", "x_ece_equal_mass", 'kind="STABLE"', "numpy reads the sort kind case-insensitively"),
    *[(_S + "pairs.py", "x_parse_rates", n, "a tally entry exists only once a row was counted (n >= 1)")
      for n in ("if (n) or True else", "else float(None),", 'float("XXnanXX")')],
    (_S + "bootstrap.py", "x_detection_bootstrap", "chunk: int = 257", _CHUNK),
    (_S + "bootstrap.py", "x_detection_bootstrap", "n_boot, seed, expand=False)", _CHUNK),
    (_S + "bootstrap.py", "x_detection_bootstrap", "cluster_weight_chunks(None,", "expand=False never reads the codes"),
    (_S + "bootstrap.py", "x_detection_bootstrap", "chunk, expand=None)", "None is falsy like False: the same branch"),
    (_S + "bootstrap.py", "x_detection_bootstrap", "np.ones((2, n))", "a second identical weight row only broadcasts"),
    (_S + "bootstrap.py", "x_detection_bootstrap", ".astype(None)", "astype(None) is float64, as astype(float)"),
    *[(_S + "bootstrap.py", "x_detection_bootstrap", n, "codes come from np.unique: every code 0..C-1 occurs, so "
       "bincount has length C without minlength") for n in ("np.bincount(codes, )", "weights=yi, )", "weights=ys, )")],
    (_S + "bootstrap.py", "x_detection_bootstrap", "if (r.size > 1) or True else", "np.std(ddof=1) of one replicate is NaN too"),
    (_S + "bootstrap.py", "x_detection_bootstrap", "if r.size >= 1 else", "np.std(ddof=1) of one replicate is NaN too"),
    (_S + "bootstrap.py", "x_mean_bootstrap", "chunk: int = 257", _CHUNK),
    (_S + "bootstrap.py", "x_mean_bootstrap", "n_boot, seed, )]", _CHUNK),
    (_S + "bootstrap.py", "x_mean_bootstrap", "if (r.size > 1) or True else", "np.std(ddof=1) of one replicate is NaN too"),
    (_S + "bootstrap.py", "x_mean_bootstrap", "if r.size >= 1 else", "np.std(ddof=1) of one replicate is NaN too"),
    (_S + "bootstrap.py", "x_cluster_weight_chunks", "rng.integers(n_clusters, size=(b, n_clusters))",
     "integers(high) with one bound draws from [0, high): the same call, the same stream"),
    (_S + "bootstrap.py", "x_cluster_weight_chunks", ".astype(None)", "astype(None) is float64, as astype(float)"),
    (_S + "bootstrap.py", "x_detection_bootstrap_loop", "rng.integers(n_clusters, size=n_clusters)",
     "integers(high) with one bound draws from [0, high): the same call, the same stream"),
    *[("src/tamperbench/store/lock.py", f, ".decode(\"ASCII\",", "codec names are case-insensitive")
      for f in ("x_preflight", "x_acquire", "x__held_elsewhere")],
    ("src/tamperbench/store/lock.py", "x_acquire", "os.ftruncate(fd, 1)",
     "the pid written next at offset 0 always covers the one byte kept"),
    *[("src/tamperbench/store/run_store.py", "x_canonical_json", n, v) for n, v in (
        ('mode="XXjsonXX"', "pydantic-core serialises every mode other than 'python' as JSON"),
        ('mode="JSON"', "pydantic-core serialises every mode other than 'python' as JSON"),
        ("ensure_ascii=None", "None is falsy like False"))],
    *[("src/tamperbench/store/run_store.py", "xǁRunStoreǁopen", n, "spec_dict comes from canonical_json, whose keys are "
       "already sorted at every level: dumping it unsorted keeps that order")
      for n in ("sort_keys=None))", "indent=2, ))", "sort_keys=False))")],
    ("src/tamperbench/store/run_store.py", "xǁRunStoreǁclose", 'self._lock_key = ""',
     "releasing the key \"\" is a no-op like skipping it: a second close changes nothing either way"),
    ("src/tamperbench/store/lock.py", "x_preflight", "            return",
     "the climb ends at '.' or '/', which always exist (a deleted working directory still stats): break is never reached"),
    *[("src/tamperbench/store/lock.py", "x_preflight", n, "the probe file's name is never seen: it is removed at once")
      for n in ("mkstemp(prefix=None,", "mkstemp(dir=probe_in)", 'prefix="XX.tb-preflight-XX"', 'prefix=".TB-PREFLIGHT-"')],
    ("src/tamperbench/store/run_store.py", "xǁRunStoreǁensure_table", '" primary key"', "SQL keywords are case-insensitive"),
    *[("src/tamperbench/store/run_store.py", "xǁRunStoreǁ_transaction", n,
       "DuckDB's Python replacement scan resolves `batch` to the local Arrow table of that name when no view is "
       "registered under it (BATCH: identifiers are case-insensitive)") for n in ('register("XXbatchXX"', 'register("BATCH"')],
    *[("src/tamperbench/store/run_store.py", "x_read_spec", n, "this machine's locale encoding is UTF-8, and codec "
       "names are case-insensitive") for n in ('read_text(encoding=None)', 'read_text(encoding="UTF-8")')],
    ("src/tamperbench/store/run_store.py", "x__check_version", 'row = ""', '"" and None are both falsy: found is None'),
    *[("src/tamperbench/store/run_store.py", "xǁRunStoreǁ_connect", n, "differs only for a DuckDB error with an empty "
       "message, which DuckDB never raises (the fallback is defensive)") for n in
      ("if (str(err)) or True else", "if str(None) else", "else type(None).__name__")],
    *[("src/tamperbench/store/run_store.py", "xǁRunStoreǁ_arrow_batch", n,
       "pydantic-core serialises every mode other than 'python' as JSON") for n in ('mode="XXjsonXX"', 'mode="JSON"')],
    ("src/tamperbench/store/run_store.py", "xǁRunStoreǁrows", 'where: str = "XXXX"',
     "SELECT * FROM t XXXX: DuckDB reads the word as a table alias, every row is still read"),
]

# stats/dose.py, each checked by reading the code path the mutant changes.
_D = "src/tamperbench/stats/dose.py"
_CONVEX = ("the penalised likelihood is convex (logistic loss plus a quadratic prior, box bounds): L-BFGS-B reaches the "
           "same optimum from zeros as from the full-data fit; the start only saves iterations")
_LBFGSB = "scipy.optimize.minimize picks L-BFGS-B itself for a bounded problem without constraints (and reads the name case-insensitively)"
_MAXITER = "the fits converge in far fewer than 2,000 (or scipy's default 15,000) iterations"
_SYM = "the Gauss-Hermite nodes and weights are symmetric about 0 (b ~ N(0, s^2)): E f(c - b) = E f(c + b)"
EQUIVALENT += [
    *[(_D, "x_dose_response", f"np.asarray({a}, {r}", _NUMERIC) for a in ("y", "z", "dose") for r in ("dtype=None)", ")")],
    (_D, "x_dose_response", "if y.size == 1 or len(set(z)) < 2",
     "an input of 0 or 1 rows has fewer than two z values: len(set(z)) < 2 refuses it the same way"),
    *[(_D, "x_dose_response", n, "the BLAS thread count during the refits changes no value, only the speed")
      for n in ("threadpool_limits(None)", "threadpool_limits(2)")],
    *[(_D, "x__refit", n, _CONVEX) for n in ("sigmas, weights=w, start=None)", "sigmas, weights=w, )")],
    (_D, "x_dose_response", "sig_tot, None, w[0])", _CONVEX),
    (_D, "x_fit_map", "if (start is None) or True else start", _CONVEX),
    *[(_D, "x_fit_map", n, _LBFGSB) for n in ('method=None,', 'jac=True, bounds=bounds,', 'method="l-bfgs-b"')],
    *[(_D, "x_fit_map", n, _MAXITER) for n in ("options=None)", '"maxiter": 2001}', "                            )")],
    (_D, "x_fit_map", "if sizes else np.zeros(1)",
     "with no random effects r is empty: a length-1 prec broadcasts against it to an empty product"),
    *[(_D, "x__design", n, "csr_matrix infers the shape (rows, max code + 1), which is (codes.size, L)")
      for n in ("codes)), shape=None))", "codes)), ))")],
    (_D, "x__design", "if (blocks) or True else",
     "hstack of the dense block alone is the same CSR matrix as csr_matrix(dense)"),
    *[(_D, "x_zero_dose_margin", n, _SYM) for n in ("expit(b0 + b1 - b)", "- expit(b0 - b))")],
]

# OWMI analysis (its statistics), each checked by reading the code path the mutant changes.
_O = "src/tamperbench/owmi/"
EQUIVALENT += [
    (_O + "observer_classifier.py", "x_classifier_rows", '[2 if x["condition"] == "intervention" else 0',
     "scikit-learn sorts the class labels: column 1 of predict_proba is the intervention class whether it is 1 or 2"),
    (_O + "observer_classifier.py", "x_classifier_rows", "TfidfVectorizer(ngram_range=(1, 2), )",
     "min_df=1 is TfidfVectorizer's default"),
    (_O + "observer_classifier.py", "x_classifier_rows", "LogisticRegression(max_iter=1001)",
     "L-BFGS converges on these TF-IDF fits in far fewer than 1,000 iterations: the cap is never reached"),
    (_O + "summary.py", "x_render", '(store.has_table("owmi_calibration")) or True',
     "store.rows gives [] for a missing table: the guard only saves a query"),
    (_O + "summary.py", "x_render", 'f = lambda x, d=4:',
     "every call of f passes d (2, 2, 4, 3): the default is never used"),
    (_O + "summary.py", "x_render", "f(js, 4), f(ce, ))", "f's default d is 3, the digits the call passed"),
    (_O + "analysis/probe_fit.py", "x_fit_layer", "LogisticRegression(max_iter=2001)",
     "the standardised probe fits converge in far fewer than 2,000 iterations: the cap is never reached"),
    (_O + "analysis/probe_fit.py", "x_fit_layer", "np.abs(null).max() <= 0.1)",
     "a null margin is k/n - 0.5 with k/n correctly rounded: no float k/n lies exactly 0.1 from 0.5 (0.6 and 0.4 "
     "round to 0.0999...98 away), so < and <= agree"),
    (_O + "analysis/decay.py", "x_decay_markdown", "{_n(r['bh_q'], )}", "render._n's default is 4 digits"),
    *[(_O + "analysis/decay.py", "x__leg", needle, "_leg's status is only compared with 'positive' and 'not_estimable' "
       "(decay_verdict) and never printed: another name for no_interval, unvalidated or not_positive changes nothing")
      for needle in ('"XXno_intervalXX"', '"NO_INTERVAL"', '"XXunvalidatedXX"', '"UNVALIDATED"', '"XXnot_positiveXX"',
                     '"NOT_POSITIVE"')],
    (_O + "analysis/claims.py", "x_claim", "float('NAN')", 'float() parses "NAN" as it parses "nan"'),
    (_O + "analysis/decay.py", "x_track_contrast", "chunk: int = 257", _CHUNK),
    *[(_O + "analysis/decay.py", "x_track_contrast", n, "np.std(ddof=1) of one or zero replicates is NaN (numpy warns), "
       "the else branch's value") for n in ("if (diff.size > 1) or True else", "if diff.size >= 1 else")],
    (_O + "analysis/decay.py", "x_track_contrast", "n_boot, seed, expand=False)", _CHUNK + "; the default chunk is 256"),
    *[(_O + "analysis/decay.py", "x_track_contrast", n, "cluster_weight_chunks reads codes only to expand counts to "
       "observations, and expand=None is falsy like False: both yield the same per-cluster counts")
      for n in ("cluster_weight_chunks(None, n_c", "chunk, expand=None)")],
    *[(_O + "analysis/decay.py", "x_track_contrast", n, _NUMERIC + " (stats.pairs gives 0/1 reports and float scores)")
      for n in ("np.asarray(k[f], dtype=None)", "np.asarray(k[f], )")],
    (_O + "analysis/claims.py", "x_claim", 'get("m0") if (ladder) or True else None',
     "a falsy ladder (None or {}) gives (ladder or {}).get('m0') = None, the else branch's value"),
    (_O + "analysis/profile.py", "x_score_runs", "n_boot: int = 2001",
     "both callers (owmi score's CLI and the report site) pass n_boot: the default is never used"),
    (_O + "analysis/profile.py", "x_score_runs", '["p_value"] is not None) or True',
     "benjamini_hochberg reads its p-values with np.asarray(dtype=float), which turns None into NaN: the same input"),
    *[(_O + "analysis/reconstruction.py", "x_load_validation", n, "this machine's locale encoding is UTF-8, and codec "
       "names are case-insensitive") for n in ('read_text(encoding=None)', 'read_text(encoding="UTF-8")')],
    (_O + "analysis/reconstruction.py", "x__signed", 'return _n(None) if _n(x) == "n/a"',
     "_n(x) == 'n/a' holds only for None or a non-finite float, and _n(None) is that same 'n/a'"),
]

KILLED = {1, 3}           # a test failed (3: pytest internal error, which mutmut counts as a kill)
TIMEOUT = {36, -24, 24, 152, 255}


def configured_patterns() -> list[str]:
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]
    return list(cfg["only_mutate"])


def configured_modules() -> list[str]:
    pats = configured_patterns()
    found = sorted(str(p.relative_to(REPO)) for p in (REPO / "src").rglob("*.py"))
    return [f for f in found if any(fnmatch.fnmatch(f, p) for p in pats) and not f.endswith("__init__.py")]


def dotted(path: str) -> str:
    p = Path(path)
    parts = p.with_suffix("").parts
    if parts[0] == "src":
        parts = parts[1:]
    return ".".join(parts)


def load_meta(path: str) -> dict[str, int | None]:
    meta = REPO / "mutants" / (path + ".meta")
    if not meta.exists():
        return {}
    return json.loads(meta.read_text())["exit_code_by_key"]


def diff_for(name: str, path: str) -> str:
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    return get_diff_for_mutant(name, path=Path(path))


_SQL = re.compile(r"""["'](select|insert|create|delete|update)\b""", re.I)


def equivalent_reason(name: str, path: str, diff: str) -> str | None:
    func = name.rpartition(".")[2].split("__mutmut_")[0]
    added = [ln[1:] for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    removed = [ln[1:] for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    if (len(added) == len(removed) == 1 and added[0] != removed[0] and added[0].lower() == removed[0].lower()
            and _SQL.search(added[0]) and '\\"' not in added[0]):
        return "only the case of an SQL statement changed (keywords and unquoted identifiers are case-insensitive)"
    if len(added) == len(removed) == 1 and added[0].replace('float("NAN")', 'float("nan")') == removed[0] != added[0]:
        return 'float() parses "NAN" as it parses "nan"'
    for mod, fn, needle, why in EQUIVALENT:
        if mod == path and fn == func and any(needle in ln for ln in added):
            return why
    return None


def report(modules: list[str], show: bool) -> int:
    os.chdir(REPO)
    rows, worst = [], 100.0
    for path in modules:
        codes = load_meta(path)
        if not codes:
            rows.append((path, None))
            continue
        killed = sum(c in KILLED for c in codes.values())
        timeouts = sum(c in TIMEOUT for c in codes.values())
        unchecked = sum(c is None for c in codes.values())
        survivors = [k for k, c in codes.items() if c is not None and c not in KILLED | TIMEOUT]
        equivalent, real = [], []
        for name in survivors:
            d = diff_for(name, path)
            why = equivalent_reason(name, path, d)
            (equivalent if why else real).append((name, d, why))
        total = len(codes) - unchecked - len(equivalent)
        if total == 0:
            rows.append((path, None))
            worst = 0.0
            continue
        score = 100.0 * (killed + timeouts) / total
        worst = min(worst, score)
        rows.append((path, (score, killed, timeouts, len(real), len(equivalent), unchecked, total)))
        if show:
            for name, d, _ in real:
                print(f"\n# survived ({'no tests' if codes[name] in (5, 33) else codes[name]}): {name}\n{d}")
            for name, _, why in equivalent:
                print(f"# equivalent, excluded: {name}: {why}")
    print(f"\n{'module':<44} {'score':>7} {'killed':>7} {'timeout':>8} {'survived':>9} {'equiv':>6} {'unrun':>6}")
    for path, r in rows:
        if r is None:
            print(f"{path:<44} {'-':>7}  (no mutants run: see mutmut's output above)")
            continue
        score, killed, timeouts, surv, eq, unchecked, _ = r
        print(f"{path:<44} {score:6.1f}% {killed:7d} {timeouts:8d} {surv:9d} {eq:6d} {unchecked:6d}")
    print("score = (killed + timeout) / (mutants run - known equivalents); `--show` prints survivors' diffs")
    return 0 if rows and worst >= 90.0 else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", help="src/... paths (default: every [tool.mutmut] only_mutate module)")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("MUTATE_JOBS", "2")))
    ap.add_argument("--keep", action="store_true", help="reuse ./mutants instead of starting clean")
    ap.add_argument("--report-only", action="store_true", help="print the score of the last run, run nothing")
    ap.add_argument("--show", action="store_true", help="print the diff of each surviving mutant")
    ap.add_argument("--pytest-args", default="",
                    help="extra pytest options for every run (PYTEST_ADDOPTS), e.g. '--ignore=tests/e2e' for a quick "
                         "look, or '--deselect NODEID' for a test another change broke; the figure to publish "
                         "is the one without")
    args = ap.parse_args(argv)

    known = configured_modules()
    modules = [str(Path(m)) for m in args.modules] or known
    unknown = [m for m in modules if m not in known]
    if unknown:
        print(f"error: {', '.join(unknown)}: not a module under [tool.mutmut] only_mutate in pyproject.toml",
              file=sys.stderr)
        return 2
    if not args.report_only:
        if not args.keep:
            shutil.rmtree(REPO / "mutants", ignore_errors=True)
        names = [dotted(m) + ".*" for m in modules]
        mutmut = [sys.executable, "-m", "mutmut", "run", "--max-children", str(args.jobs), *names]
        print("$", " ".join(mutmut), flush=True)
        env = dict(os.environ)
        if args.pytest_args:
            env["PYTEST_ADDOPTS"] = (env.get("PYTEST_ADDOPTS", "") + " " + args.pytest_args).strip()
            print(f"PYTEST_ADDOPTS={env['PYTEST_ADDOPTS']!r}")
        proc = subprocess.run(mutmut, cwd=REPO, env=env)
        if proc.returncode not in (0, 1):
            print(f"error: mutmut exited with {proc.returncode}", file=sys.stderr)
            return proc.returncode
    return report(modules, args.show)


if __name__ == "__main__":
    sys.exit(main())
