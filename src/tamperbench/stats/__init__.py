"""The estimators OWMI, the jury and the read-outs report, importable from one place.

``from tamperbench.stats import dprime, auroc, detection_bootstrap, tost_pvalue`` works; each name lives in a
submodule (``sdt``, ``bootstrap``, ``equivalence``, ...), loaded on first use so that ``import tamperbench.stats``
(and the command line, which imports submodules) does not pay for scipy before it needs it.
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> submodule that defines it
_EXPORTS: dict[str, str] = {
    # signal detection (sdt.py)
    "dprime": "sdt", "dprime_counts": "sdt", "corrected_rate": "sdt", "auroc": "sdt", "weighted_auroc": "sdt",
    # cluster bootstrap (bootstrap.py)
    "detection_bootstrap": "bootstrap", "mean_bootstrap": "bootstrap", "percentile_interval": "bootstrap",
    "ClusterDetection": "bootstrap",
    # equivalence (TOST) (equivalence.py)
    "tost_pvalue": "equivalence", "equivalence_bound": "equivalence",
    # intervals for proportions (intervals.py)
    "wilson": "intervals", "error_rate_upper_bound": "intervals", "rule_of_three": "intervals",
    # multiple comparisons (multiple.py)
    "benjamini_hochberg": "multiple",
    # agreement between raters (agreement.py)
    "cohen_kappa": "agreement", "fleiss_kappa": "agreement", "fleiss_kappa_from_ratings": "agreement",
    "percent_agreement": "agreement",
    # calibration of confidences (calibration.py)
    "brier": "calibration", "ece_equal_mass": "calibration", "selective_auroc": "calibration",
    # paired detection over stored rows (pairs.py)
    "paired_detection": "pairs", "control_margin": "pairs",
    # the dose-response simplification (dose.py) and variance components (variance.py)
    "dose_response": "dose", "variance_components": "variance", "iccs": "variance",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tamperbench.stats' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
