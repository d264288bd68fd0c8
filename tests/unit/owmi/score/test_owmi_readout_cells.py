"""The read-out in ``owmi score``: part of every cell and pool (never pooled), the token-level g as the
AUROC's score under ``choice``, the outputs naming it, and run directories written before the read-out
was recorded (scored as ``generated``; resuming them refused in one line). Real DuckDB run directories."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, create_model

from tamperbench.errors import UserError
from tamperbench.owmi.score.profile import score_runs
from tamperbench.owmi.score.render import to_markdown
from tamperbench.owmi.protocol.records import RUNS_TABLE, OwmiRun
from tamperbench.store import RunStore
from tamperbench.store.run_store import trial_key


class _Spec(BaseModel):
    suite: str = "owmi"
    name: str = "readout cells"


BASE = dict(cell_id="c", model="m", model_revision="rev", dtype="float32", quantized=False, temperature=0.0,
            top_p=1.0, benchmark="b", domain="knowledge", item_provenance="{}", object_kind="resid_post",
            site="resid_post.1", layer=1, operator="add", dose=1.0, positions="task", when="prefill", seed=0,
            probe_family="detection", probe_text="p", prompt_text="t", prompt_ids=[1], intervened_positions=[],
            track="A", hook_scope="active", parse_ok=True)


def _rows(readout: str, n: int = 12) -> list[OwmiRun]:
    """n items, intervention and sham. Under choice every report says "yes" (g > 1/2) but g is higher under
    the intervention; under generated the verbal report is the constant 'yes' with a constant score."""
    out = []
    for i in range(n):
        for cond, g in (("intervention", 0.9 - 0.01 * i), ("sham", 0.6 + 0.01 * i)):
            tok = dict(choice_g=g, choice_logprobs="{}", response="", finish_reason="choice", max_new_tokens=0) \
                if readout == "choice" else dict(graded=0.5, response='{"changed": "yes", "score": 50}',
                                                 finish_reason="eos", max_new_tokens=8)
            out.append(OwmiRun(**BASE, **tok, readout=readout, key=trial_key([readout, i, cond]), pair_id=f"p{i}",
                               item_id=f"i{i}", condition=cond, detected=True))
    return out


def _write(run, records, spec=None):
    with RunStore.open(run, spec or _Spec()) as store:
        store.ensure_table(RUNS_TABLE, type(records[0]))
        store.write(RUNS_TABLE, list(records))


def test_choice_auroc_reads_g_and_readouts_share_no_cell_or_pool(tmp_path):
    # the same pair ids under both read-outs (one design, read two ways): pooled, each pair would hold two
    # intervention rows (paired_detection refuses that); kept apart, each read-out is its own cell and pool
    _write(tmp_path / "run", _rows("choice") + _rows("generated"))
    result = score_runs([tmp_path / "run"], n_boot=200)
    cells = {c["cell"]["readout"]: c for c in result["cells"]}
    assert sorted(cells) == ["choice", "generated"] and len(result["cells"]) == 2
    ch, gen = cells["choice"]["detection"]["complete"], cells["generated"]["detection"]["complete"]
    assert ch["pairs"] == gen["pairs"] == 12
    # every binary report is "yes" in both: the hit and false-alarm rates cannot separate; g does (AUROC 1)
    assert ch["hit_rate"] == ch["false_alarm_rate"] == 1.0
    assert ch["auroc"] == pytest.approx(1.0) and gen["auroc"] == pytest.approx(0.5)
    assert ch["auroc_ci"][0] > 0.5 and ch["dprime_ci"] is not None
    assert cells["choice"]["readout"]["kind"] == "token-level read-out (not a verbal report)"
    assert cells["choice"]["readout"]["parse_rate_by_construction"] is True
    assert cells["generated"]["readout"] == {"name": "generated", "kind": "verbal report",
                                            "parse_rate_by_construction": False,
                                            "continuous_score": "the reported score / 100 (graded)"}
    pools = {p["readout"]: p["pool"] for p in result["pooled"]}
    assert pools == {"generated": "m [rev, float32] all detection cells",
                     "choice": "m [rev, float32, choice read-out (token-level)] all detection cells"}
    assert sorted(result["variance"]) == ["m", "m · choice read-out"]
    assert result["readouts"] == ["choice", "generated"]
    md = to_markdown(result)
    assert "- choice: a token-level read-out, not a verbal report (C.7)" in md
    line = next(x for x in md.splitlines() if x.startswith("| m @ rev float32 | b · resid\\_post.1") and "(token-level)" in x
                and "intervention" in x)
    assert "choice read-out (token-level)" in line and "(token-level read-out: unparsed = too little option mass)" in line


def test_run_written_before_the_readout_column_scores_as_generated_and_refuses_resume(tmp_path, tb_inprocess):
    fields = {k: (f.annotation, f) for k, f in OwmiRun.model_fields.items()
              if k not in ("readout", "readout_detail", "choice_g", "choice_logprobs")}
    Old = create_model("OldOwmiRun", __base__=None, **fields)  # the table an older tamperbench wrote
    old = [Old(**r.model_dump(exclude={"readout", "readout_detail", "choice_g", "choice_logprobs"}))
           for r in _rows("generated")]
    from tamperbench.owmi.run.spec import quick_spec

    spec = json.loads(quick_spec().model_dump_json(exclude={"readout"}))
    run = tmp_path / "old"
    _write(run, old, spec=create_model("OldSpec", **{k: (type(v) if v is not None else object, v)
                                                     for k, v in spec.items()})())
    result = score_runs([run], n_boot=50)
    assert [c["cell"]["readout"] for c in result["cells"]] == ["generated"] and not result["excluded_runs"]
    assert result["cells"][0]["detection"]["complete"]["pairs"] == 12
    before = sorted(p.name for p in run.iterdir())
    got = tb_inprocess("owmi", "run", "--preset", "quick", "--out", str(run))
    assert got.returncode == 2
    err = got.stderr.strip().splitlines()
    assert len(err) == 1 and "table owmi_runs was written by an older tamperbench" in err[0]
    assert "readout" in err[0] and "--new" in err[0]
    assert sorted(p.name for p in run.iterdir()) == before


def test_unknown_readout_on_the_command_line_is_one_line_and_creates_nothing(tmp_path, tb_inprocess):
    got = tb_inprocess("owmi", "run", "--preset", "quick", "--readout", "logits", "--out", str(tmp_path / "r"))
    assert got.returncode == 2
    assert got.stderr.strip() == "error: --readout: must be one of generated, constrained, choice; got 'logits'"
    assert not (tmp_path / "r").exists()
    cfg = tmp_path / "c.json"
    from tamperbench.owmi.run.spec import quick_spec

    cfg.write_text(quick_spec(tracks=["A", "C"]).model_dump_json())
    got = tb_inprocess("owmi", "run", "--config", str(cfg), "--readout", "choice", "--out", str(tmp_path / "r"))
    assert got.returncode == 2 and len(got.stderr.strip().splitlines()) == 1
    assert got.stderr.startswith("error: --readout: readout: 'choice' reads a closed option set, and Track C's")
    assert not (tmp_path / "r").exists()


def test_resume_keys_differ_by_readout():
    from tamperbench.owmi.run.spec import quick_items
    from tamperbench.owmi.run.plan import planned_keys, unit_coords
    from tamperbench.owmi.run.spec import quick_spec

    keys = {}
    for ro in ("generated", "choice"):
        spec = quick_spec(readout=ro)
        keys[ro] = planned_keys(spec, unit_coords(spec, "embedded", "builtin", spec.objects[0], spec.operators[0],
                                                  quick_items(1)[0], 0), [])
    assert not {k for k, _, _ in keys["generated"]} & {k for k, _, _ in keys["choice"]}
    assert not {p for _, p, _ in keys["generated"]} & {p for _, p, _ in keys["choice"]}
    with pytest.raises(UserError):  # a choice spec is not the generated run's spec: the store refuses a resume
        from tamperbench.store.spec_check import refuse_other_spec

        choice = quick_spec(readout="choice")
        refuse_other_spec(".", json.loads(quick_spec().model_dump_json()), choice, json.loads(choice.model_dump_json()))
