"""Where models come from (``sources``), how they are loaded (``loader``) and run (``hf``)."""

from tamperbench.models.loader import load_backend
from tamperbench.models.provenance import ModelProvenance

__all__ = ["load_backend", "ModelProvenance"]
