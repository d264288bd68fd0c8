"""C.8: the linear probe reads the cell's own intervention (audit, issue 26 item 2). Before, one probe
(add x 8, direction seed 7) attached to every cell at its site whatever its operator or dose."""

from __future__ import annotations

from pydantic import BaseModel

from tamperbench.owmi.score.anchor_store import save_anchor
from tests.unit.owmi.score.test_owmi_audit_text import rec, score as _score_rows

IDENT = {"model": "m", "model_revision": "subject-rev", "dtype": "float32", "quantized": False}


class _Spec(BaseModel):
    name: str = "probe anchor"


def _probe(**iv) -> dict:
    a = {"kind": "probe", **IDENT, "provenance_id": "p", "site": "resid_post.1", "layer": 1, "m_probe": 0.4,
         "passes": True, "layers": [{"null_quantile": 0.1}], "spec": {"dose": 8.0, "direction_seed": 7}}
    return {**a, **({"intervention": iv} if iv else {})}


def _cells(tmp_path, anchors):
    from tamperbench.owmi.score.profile import score_runs

    rs = []
    for p in range(4):
        for op, dose in (("zero", 1.0), ("add", 8.0)):
            kw = dict(operator=op, dose=dose, concept="ocean" if op == "add" else None)
            for r in (rec(p, "intervention", True, p % 2 == 0, **kw), rec(p, "sham", True, False, **kw)):
                rs.append(r.model_copy(update={"pair_id": f"{op}{p}", "key": f"{r.key}-{op}"}))
    _score_rows(tmp_path, rs)  # writes tmp_path/run
    paths = [save_anchor(tmp_path / f"a{i}", _Spec(name=str(i)), a) for i, a in enumerate(anchors)]
    res = score_runs([tmp_path / "run", *paths], n_boot=20, dose_boot=0)
    return {c["cell"]["operator"]: c for c in res["cells"] if c["cell"]["probe_family"] == "detection"}


def _probe_line(cell) -> str:
    c = cell["claim"]
    return next(x for x in c["held"] + c["failed"] + c["not_measured"] if x.startswith("linear probe"))


def test_a_seeded_add_probe_reads_neither_a_zero_cell_nor_a_concept_cell(tmp_path):
    cells = _cells(tmp_path, [_probe()])  # an anchor written before probes recorded their intervention
    for op in ("zero", "add"):
        assert cells[op]["rho"] is None
        line = _probe_line(cells[op])
        assert "no probe anchor reads this cell's own intervention" in line and "seed 7" in line, line
    assert "zero@1" in _probe_line(cells["zero"]) and "concepts ocean" in _probe_line(cells["add"])


def test_a_probe_of_the_cells_own_intervention_attaches(tmp_path):
    cells = _cells(tmp_path, [_probe(operator="zero", dose=1.0, direction=None),
                              _probe(operator="add", dose=8.0, direction="concepts ocean,fire")])
    for op in ("zero", "add"):
        assert cells[op]["rho"] is not None and _probe_line(cells[op]).startswith(
            "linear probe above its null at this site: m_probe=+0.400")
