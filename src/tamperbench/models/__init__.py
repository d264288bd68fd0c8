"""Where models come from (``sources``), how they are loaded (``loader``) and run (``hf``)."""

from tamperbench.models.provenance import ModelProvenance
from tamperbench.models.registry import load_backend, register_backend

__all__ = ["load_backend", "ModelProvenance", "register_backend"]
