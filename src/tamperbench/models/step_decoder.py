# TEMP: owmi port -- only tests/unit/owmi/test_owmi_row_targeting.py imports this path; the step decoder
# is tamperbench.models.decoding. Delete this module once that test imports the real one.
from tamperbench.models.decoding.decoder import StepDecoder
from tamperbench.models.decoding.rows import RowSnapshot, StepResult

__all__ = ["RowSnapshot", "StepDecoder", "StepResult"]
