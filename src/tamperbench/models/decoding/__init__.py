"""The step decoder in parts: KV slots (kv_slots), distribution statistics (distributions),
row state (rows) and the facade (decoder)."""

from tamperbench.models.decoding.decoder import StepDecoder
from tamperbench.models.decoding.distributions import DistStats, distribution, js_divergence
from tamperbench.models.decoding.rows import RowSnapshot, StepResult

__all__ = ["DistStats", "RowSnapshot", "StepDecoder", "StepResult", "distribution", "js_divergence"]
