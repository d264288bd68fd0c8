"""Which linear-probe anchor reads a cell's own intervention (Appendix C.8).

C.8 trains the probe "on held-out activations downstream of the intervention": the probe margin
m_probe bounds what a read-out could recover of *that* intervention, and rho = margin / m_probe (Eq. 15)
divides the cell's margin by it. Before, one probe (``add`` x 8, direction seed 7) attached to every
cell at its site whatever the cell's operator or dose, so an ``add`` x 64 concept cell, or a ``zero``
cell, was read against a probe of another intervention. Here a probe attaches only when its
intervention is the cell's:

* same site (``profile._anchor_for`` already requires it, and the weights identity),
* same operator and dose,
* for ``add``: the same kind of direction. The engine injects concept directions (cycled over a
  cell's items), so the probe must have been run with ``--concepts`` covering every concept the cell
  injected; a seeded random direction is another intervention. An anchor written before probes
  recorded their intervention was an ``add`` of a seeded random direction (the only kind there was).

A cell whose site holds only probes of other interventions gets no probe, and its claim line says
which intervention the probe at the site read, so the user knows which ``owmi probe`` to run.
"""

from __future__ import annotations

import math


def anchor_intervention(anchor: dict) -> dict:
    """The probe's intervention (older anchors: ``add`` of a seeded random direction at ``spec.dose``)."""
    if anchor.get("intervention"):
        return anchor["intervention"]
    spec = anchor.get("spec") or {}
    return {"operator": "add", "dose": spec.get("dose"),
            "direction": f"seeded random unit direction (seed {spec.get('direction_seed')})"}


def _label(iv: dict) -> str:
    dose = "(dose not recorded)" if iv.get("dose") is None else f"{float(iv['dose']):g}"
    return f"{iv['operator']}@{dose}" + (f" ({iv['direction']})" if iv.get("direction") else "")


def reads_cell(iv: dict, cell_entry: dict) -> bool:
    cell = cell_entry["cell"]
    if iv.get("operator") != cell["operator"] or iv.get("dose") is None:
        return False
    if not math.isclose(float(iv["dose"]), float(cell["dose"]), rel_tol=1e-9, abs_tol=1e-12):
        return False
    if cell["operator"] != "add":
        return True
    direction = iv.get("direction") or ""
    if not direction.startswith("concepts "):
        return False
    return set(cell_entry.get("concepts") or []) <= set(direction[len("concepts "):].split(","))


def other_probe_note(cell_entry: dict, other: dict | None) -> str | None:
    """The claim's line when no probe reads this cell's intervention but ``other`` (a probe at the same
    site and weights) reads another one; None when the site has no probe at all."""
    if other is None:
        return None
    cell = cell_entry["cell"]
    want = f"{cell['operator']}@{cell['dose']:g}" + (
        f" (concepts {','.join(cell_entry.get('concepts') or [])})" if cell["operator"] == "add" else "")
    return (f"no probe anchor reads this cell's own intervention {want} (C.8); the probe at this site read "
            f"{_label(anchor_intervention(other))}: run owmi probe with the cell's operator and dose"
            + (" and --concepts" if cell["operator"] == "add" else ""))
