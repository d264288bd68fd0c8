"""OWMI (Open-Weight Masked Introspection), cut by phase.

Layers, top to bottom (import-linter contract ``owmi-layers`` in pyproject.toml):

* ``cli``: the ``owmi`` commands (run, summary, score, probe, known-positive, train-sae);
* ``controls``: the sensitivity anchors and positive controls (known positive, linear probe anchor,
  SAE training), which train or run models of their own;
* ``run``: a spec's life, read top-down: the spec (presets, items), the runner (checks, the worker's
  context, the worker), the plan (record keys included);
* ``engine`` | ``score``: a unit's forwards under hooks, read-outs and records (engine); the offline
  statistics, claims, tables and report section over stored records (score). Neither imports the other;
* ``protocol``: what every layer reads: the design's terms (objects, operators, doses, frames), the
  stored record's shape and the probe battery.

Module paths of the flat layout that came before, and of the ``run`` modules merged since, still import,
with a DeprecationWarning, for one release (:data:`MOVED`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

# old module (under tamperbench.owmi) -> its new home; removed in the release after next
MOVED = {
    "records": "protocol.records", "probes": "protocol.probes", "probe_schema": "protocol.probe_schema",
    "forward": "engine.forward", "ragged": "engine.ragged", "objects": "engine.objects",
    "operators": "engine.operators", "conditions": "engine.conditions", "contexts": "engine.contexts",
    "choice": "engine.choice", "readout": "engine.readout", "batched": "engine.batched",
    "spec": "run.spec", "keys": "run.plan", "run.keys": "run.plan", "plan": "run.plan", "items": "run.spec", "run.items": "run.spec",
    "anchor_items": "run.anchor_items", "runner": "run.runner", "validate": "run.runner",
    "run.validate": "run.runner", "run.execute": "run.runner", "run.record": "engine.record",
    "site": "score.site", "site_forest": "score.site_forest", "summary": "score.tables",
    "observer_classifier": "score.observer_classifier", "sae_train": "controls.sae_train", "sae_cli": "cli.sae",
    "console": "cli", "cli.console": "cli", "analysis": "score", "analysis.cli": "cli.score", "analysis.cli_util": "cli.util",
    "analysis.kp_cli": "cli.known_positive", "analysis.known_positive": "controls.known_positive",
    "analysis.intervene": "controls.intervene", "analysis.threads": "controls.threads",
    "analysis.prompts": "controls.prompts", "analysis.probe": "controls.probe",
    "analysis.probe_fit": "controls.probe_fit", "analysis.positive_check": "controls.positive_check",
}


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old ``tamperbench.owmi`` module path as its new module, with a DeprecationWarning."""

    def find_spec(self, fullname, path=None, target=None):
        old = fullname.removeprefix(__name__ + ".")
        if old == fullname or old not in MOVED and not old.startswith("analysis."):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        old = spec.name.removeprefix(__name__ + ".")
        new = f"{__name__}.{MOVED.get(old) or 'score.' + old.removeprefix('analysis.')}"
        warnings.warn(f"{spec.name} moved to {new}; the old path is removed in the next release",
                      DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        self._spec = module.__spec__  # the import system stamps the old name's spec on it: put it back
        return module

    def exec_module(self, module):
        module.__spec__ = self._spec


if not any(isinstance(f, _Moved) for f in sys.meta_path):
    sys.meta_path.insert(0, _Moved())  # first: an old path under a moved package must not load a second copy
