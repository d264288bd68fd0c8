"""The probe battery (Section 3.2): texts, JSON parsing that never imputes, and the Track C rubric.

Why every probe answers in JSON: a closed answer format makes a parse failure a visible outcome
per cell and condition (Appendix D.3: the report-parse rate), instead of a silent "no". Parsing
takes the first ``{...}`` object in the reply, falls back to nothing, and says why it failed.

Reconstruction is scorable here (the source could not score it): the engine injects a concept
direction built from contrastive prompts, and the probe asks which concept from a closed set it
was, so the answer is right or wrong.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib.resources import files
from typing import Any

FAMILIES: tuple[str, ...] = ("detection", "confidence", "localization", "characterization", "reconstruction")


@lru_cache(maxsize=1)
def battery() -> dict[str, Any]:
    """The probe data file (``owmi/data/probes.json``), read once."""
    return json.loads(files("tamperbench.owmi").joinpath("data/probes.json").read_text())


def concepts() -> list[str]:
    return list(battery()["concepts"])


def categories() -> list[str]:
    return list(battery()["categories"])


def probe_text(family: str, *, person: str, n_layers: int) -> str:
    """The exact probe wording; ``person`` is 'first' (the model itself) or 'third' (observer)."""
    text = battery()["probes"][family][person]
    fill = {"{n_layers}": str(n_layers), "{last_layer}": str(n_layers - 1),
            "{categories}": ", ".join(categories()), "{concepts}": ", ".join(concepts())}
    for k, v in fill.items():
        text = text.replace(k, v)
    return text


def system_prompt() -> str:
    return battery()["system"]


_OBJ = re.compile(r"\{[^{}]*\}", re.S)


def _yes_no(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("yes", "no", "true", "false"):
        return v.strip().lower() in ("yes", "true")
    return None


def _number(v: Any, lo: float, hi: float) -> float | None:
    if isinstance(v, bool):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if lo <= x <= hi else None


def parse(family: str, reply: str, *, n_layers: int) -> dict[str, Any]:
    """Parse one probe reply. Returns ``parse_ok``, ``parse_error`` and the family's fields
    (``detected``/``graded``, ``confidence``, ``layer_report``, ``category_report``,
    ``concept_report``). Missing or out-of-range values are failures, never defaults."""
    out: dict[str, Any] = {"parse_ok": False, "parse_error": None}
    if family == "spontaneous":
        out.update(parse_ok=bool(reply.strip()), parse_error=None if reply.strip() else "empty reflection")
        return out
    m = _OBJ.search(reply)
    if not m:
        out["parse_error"] = "no JSON object in the reply"
        return out
    try:
        obj = json.loads(m.group(0))
    except json.JSONDecodeError as err:  # a ValueError whose message names the place
        out["parse_error"] = f"invalid JSON: {err.msg}"
        return out
    if not isinstance(obj, dict):
        out["parse_error"] = "JSON is not an object"
        return out
    obj = {str(k).lower(): v for k, v in obj.items()}

    def need(key: str, value: Any, what: str) -> bool:
        if value is None:
            out["parse_error"] = f"'{key}' missing or not {what}"
            return False
        return True

    if family == "detection":
        det, score = _yes_no(obj.get("changed")), _number(obj.get("score"), 0, 100)
        if need("changed", det, "yes/no") and need("score", score, "a number in 0..100") and score is not None:
            out.update(parse_ok=True, detected=det, graded=score / 100.0)
    elif family == "confidence":
        det, conf = _yes_no(obj.get("changed")), _number(obj.get("confidence"), 0, 1)
        if need("changed", det, "yes/no") and need("confidence", conf, "a number in 0..1"):
            out.update(parse_ok=True, detected=det, confidence=conf)
    elif family == "localization":
        layer = _number(obj.get("layer"), 0, n_layers - 1)
        if need("layer", layer if layer is None or layer == int(layer) else None, f"an integer in 0..{n_layers - 1}") \
                and layer is not None:
            out.update(parse_ok=True, layer_report=int(layer))
    elif family == "characterization":
        cat = str(obj.get("category", "")).strip().lower().replace(" ", "_")
        if need("category", cat if cat in categories() else None, "one of the categories"):
            out.update(parse_ok=True, category_report=cat)
    elif family == "reconstruction":
        con = str(obj.get("concept", "")).strip().lower()
        if need("concept", con if con in concepts() else None, "one of the concepts"):
            out.update(parse_ok=True, concept_report=con)
    else:
        raise ValueError(f"unknown probe family {family!r}")
    return out


def rubric_flag(reflection: str) -> bool:
    """Track C condition-blinded rubric: does the reflection volunteer an anomaly? It sees only
    the text (never the condition); an unvalidated proxy, reported with the sham false-alarm rate."""
    pats = battery()["rubric"]["anomaly_patterns"]
    return any(re.search(p, reflection, re.I) for p in pats)


def corrupted(reply: str) -> bool:
    """Malformed / degenerate generation (an outcome, never evidence): empty, or one token
    repeated over most of the reply."""
    words = reply.split()
    if not words:
        return True
    return len(words) >= 8 and max(words.count(w) for w in set(words)) / len(words) > 0.6
