"""``owmi probe`` runs the engine's other operators and its concept directions (C.8: the probe reads a
cell's own intervention), on the embedded model; a tiny probe (8 items, no permutations, one layer)."""

from __future__ import annotations

import numpy as np

from tamperbench.owmi.controls.probe import ProbeSpec, collect


def test_zero_operator_and_concept_directions_change_the_read_activations(embedded_backend):
    for spec in (ProbeSpec(operator="zero", dose=1.0, layer=4, read_layers=[5], n_items=8, n_perm=0),
                 ProbeSpec(operator="add", dose=8.0, layer=4, read_layers=[5], n_items=8, n_perm=0,
                           concepts=["ocean", "fire"])):
        f = collect(embedded_backend, spec)["features"][5]
        gap = np.linalg.norm(f[1] - f[0], axis=1)
        assert (gap > 1e-3).all(), (spec.operator, gap)
    assert ProbeSpec(operator="zero", dose=1.0).intervention() == {"operator": "zero", "dose": 1.0, "direction": None}
