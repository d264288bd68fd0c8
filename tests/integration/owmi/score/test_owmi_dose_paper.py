"""``owmi score --dose-model paper`` on OWMI records written through the real RunStore.

Synthetic records because the pooling (sites and models crossed, pairs keyed per run, the
used-object stratum) has to be checked against a known design. The sampler itself is tested by
parameter recovery in tests/unit/stats/test_stats_dose_bayes.py; here it runs once, small.
The missing-extra case runs the real CLI in a subprocess in which numpyro and jax cannot be imported
(``sys.modules[name] = None`` is how Python marks a module as unimportable).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from pydantic import BaseModel
from scipy.special import expit

from tamperbench.owmi.protocol.records import RUNS_TABLE, OwmiRun
from tamperbench.store import RunStore
from tamperbench.store.run_store import trial_key


class SynthSpec(BaseModel):
    name: str = "synthetic dose ladder"
    seed: int = 0


def _write(path, *, n_items, doses=(2.0, 4.0, 8.0), sites=("resid_post.10", "resid_post.20"), seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for site in sites:
        for dose in doses:
            for i in range(n_items):
                pid = f"{site}-{dose}-{i}"
                for cond in ("intervention", "sham"):
                    p = expit(-1.0 + (0.5 + 0.2 * dose if cond == "intervention" else 0.0))
                    out.append(OwmiRun(
                        key=trial_key([pid, cond]), pair_id=pid, cell_id=f"{site}-{dose}", model="synthetic-model",
                        model_revision="rev0123456789abcdef", dtype="float32", quantized=False, temperature=0.0,
                        top_p=1.0, max_new_tokens=32, readout="generated", benchmark="ladder", domain="knowledge",
                        item_id=f"item{i}", item_provenance="{}", object_kind="resid_post", site=site,
                        layer=int(site.split(".")[1]), operator="add", dose=dose, positions="all", when="prefill", seed=0,
                        condition=cond, hook_scope="active", track="A", probe_family="detection",
                        probe_text="did anything change?", observer_tier=None, prompt_text="<prompt>", prompt_ids=[1, 2],
                        intervened_positions=[], response="{}", finish_reason="stop", parse_ok=True,
                        detected=bool(rng.random() < p), graded=None, confidence=None))
    store = RunStore.open(path, SynthSpec())
    store.ensure_table(RUNS_TABLE, OwmiRun)
    store.write(RUNS_TABLE, out)
    store.close()
    return path


def _cli(*args, block_bayes=False, cwd=None):
    # numpyro marked unimportable (not jax: scipy's array-API helpers look jax up in sys.modules and would
    # trip over a None there, which a machine without jax never shows)
    pre = "import sys; sys.modules['numpyro'] = None; " if block_bayes else "import sys; "
    code = pre + "from tamperbench.cli import main; sys.argv = ['tamperbench', *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "COLUMNS": "200"}, timeout=600)


def test_too_few_items_is_not_identified_and_says_why(tmp_path):
    run = _write(tmp_path / "run", n_items=3)
    res = _cli("owmi", "score", run, "--out", tmp_path / "s", "--boot", "50", "--dose-boot", "0", "--dose-model", "paper")
    assert res.returncode == 0, res.stderr
    assert "the paper's model" in res.stdout
    assert "not identified: 3 distinct item(s), fewer than 10" in res.stdout
    result = json.loads((tmp_path / "s" / "owmi_score.json").read_text())
    assert result["dose_model"] == "paper"
    (entry,) = result["paper_ladders"]
    assert entry["identified"] is False and entry["m0"] is None
    # one pool over both sites: the paper's crossed site effect, not one fit per site
    assert entry["sites"] == ["resid_post.10", "resid_post.20"] and entry["pairs"] == 2 * 3 * 3
    assert entry["doses"] == [2.0, 4.0, 8.0]


def test_default_is_the_simplified_model_only(tmp_path):
    run = _write(tmp_path / "run", n_items=3)
    res = _cli("owmi", "score", run, "--out", tmp_path / "s", "--boot", "50", "--dose-boot", "0")
    assert res.returncode == 0, res.stderr
    result = json.loads((tmp_path / "s" / "owmi_score.json").read_text())
    assert result["dose_model"] == "simple" and "paper_ladders" not in result
    assert "ours (simplified)" in res.stdout and "the paper's model" not in res.stdout


def test_paper_without_the_extra_is_one_line_naming_the_install(tmp_path):
    run = _write(tmp_path / "run", n_items=3)
    res = _cli("owmi", "score", run, "--out", tmp_path / "s", "--dose-model", "paper", block_bayes=True)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'tamperbench[bayes]'" in lines[0], res.stderr
    assert not (tmp_path / "s").exists()  # refused before scoring
    # and the default still works where the extra is missing
    ok = _cli("owmi", "score", run, "--out", tmp_path / "s2", "--boot", "50", "--dose-boot", "0", block_bayes=True)
    assert ok.returncode == 0, ok.stderr


def test_unknown_dose_model_is_one_line(tmp_path):
    run = _write(tmp_path / "run", n_items=3)
    res = _cli("owmi", "score", run, "--dose-model", "bayes")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == ["error: --dose-model: expected simple or paper, got 'bayes'"]


def test_pooled_fit_samples_and_reports_m0(tmp_path):
    pytest.importorskip("numpyro", reason="the [bayes] extra (pip install 'tamperbench[bayes]')")
    from tamperbench.owmi.score.dose_paper import markdown, paper_ladders

    run = _write(tmp_path / "run", n_items=12)
    (entry,) = paper_ladders([run], seed=0, chains=2, warmup=200, draws=200)
    assert entry["pairs"] == 2 * 3 * 12 and entry["items"] == 12
    assert entry["levels"] == {"item": 12, "site": 2}  # one model: its effect is absorbed by b0, and said so
    assert entry["factors_dropped_one_level"] == ["model"]
    assert entry["m0"] is not None and entry["sampler"]["library"] == "numpyro"
    line = markdown([entry])[-1]
    assert "m0 = " in line or "not identified: " in line


def test_every_missing_condition_is_named_before_sampling(tmp_path):
    from tamperbench.owmi.score.dose_paper import paper_ladders

    run = _write(tmp_path / "run", n_items=3, doses=(4.0,))
    (entry,) = paper_ladders([run])
    assert entry["identified"] is False and entry["m0"] is None and "diagnostics" not in entry
    assert entry["reason"] == ("1 positive dose level(s): at least two are needed to extrapolate to zero dose; "
                               "3 distinct item(s), fewer than 10: the item random effect would be the prior")
