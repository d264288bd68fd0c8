"""The constrained read-out on the embedded model: every probe family's JSON answer decoded under its
schema's grammar (llguidance) parses (the generated read-out parses none of them here), each record
names its grammar and library; and without llguidance the run is one line before anything is made."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tamperbench.owmi.protocol.probe_schema import probe_schema
from tamperbench.owmi.run.spec import quick_spec

NO_LLGUIDANCE = ("import sys; sys.modules['llguidance'] = None; "
                 "sys.argv = ['tamperbench', *sys.argv[1:]]; from tamperbench.cli import main; main()")


@pytest.mark.model
def test_every_family_parses_under_its_grammar(embedded_backend, run_one_unit):
    spec = quick_spec(readout="constrained", items_per_benchmark=1, tracks=["A"], scopes=["active"],
                      conditions=["intervention", "sham", "observer"], observer_classifier=False, probe_max_new_tokens=24)
    eng, _unit, _item, rows = run_one_unit(embedded_backend, spec)
    fams = {r["probe_family"] for r in rows}
    assert fams == set(spec.probes) and len(rows) == 5 * 3
    for fam in fams:
        got = [r for r in rows if r["probe_family"] == fam]
        assert sum(r["parse_ok"] for r in got) / len(got) >= 0.95, [r["response"] for r in got]
    for r in rows:
        assert r["readout"] == "constrained" and r["max_new_tokens"] == 24 and r["choice_g"] is None
        detail = json.loads(r["readout_detail"])
        assert json.loads(detail["grammar_schema"]) == probe_schema(r["probe_family"], eng.n_layers)
        assert detail["grammar_library"] == "llguidance 1.9.1"
        assert json.loads(r["response"])  # the answer is the JSON object itself, nothing around it


def test_constrained_without_llguidance_is_one_line_and_creates_nothing(tmp_path):
    out = tmp_path / "r"
    p = subprocess.run([sys.executable, "-c", NO_LLGUIDANCE, "owmi", "run", "--preset", "quick", "--readout",
                        "constrained", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert lines[0].startswith("error: readout 'constrained':") and "llguidance==1.9.1" in lines[0]
    assert not out.exists()
