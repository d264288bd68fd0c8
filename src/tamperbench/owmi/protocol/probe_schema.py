"""Each probe family's JSON answer as a JSON schema: the grammar of the ``constrained`` read-out.

Why from the probe texts: the schema says exactly what the probe asks for (``owmi/data/probes.json``)
and what ``probes.parse`` accepts -- detection ``{"changed": "yes" | "no", "score": 0..100}``,
confidence ``{"changed", "confidence": 0..1}``, localization ``{"layer": 0..n_layers-1}``,
characterization and reconstruction one word of their closed sets -- so a constrained answer can
only fail to parse by running out of its token budget. Track C's reflection is free text and has no
schema: under ``constrained`` it is decoded unconstrained, and its records say so.
"""

from __future__ import annotations


def probe_schema(family: str, n_layers: int) -> dict | None:
    """The JSON schema of ``family``'s answer (None: free text, Track C's reflection)."""
    from tamperbench.owmi.protocol.probes import categories, concepts

    changed = {"type": "string", "enum": ["yes", "no"]}
    props: dict
    if family == "detection":
        props = {"changed": changed, "score": {"type": "integer", "minimum": 0, "maximum": 100}}
    elif family == "confidence":
        props = {"changed": changed, "confidence": {"type": "number", "minimum": 0, "maximum": 1}}
    elif family == "localization":
        props = {"layer": {"type": "integer", "minimum": 0, "maximum": n_layers - 1}}
    elif family == "characterization":
        props = {"category": {"type": "string", "enum": list(categories())}}
    elif family == "reconstruction":
        props = {"concept": {"type": "string", "enum": list(concepts())}}
    else:
        return None
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
