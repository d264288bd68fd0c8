"""What inspect registers from tamperbench (the ``inspect_ai`` entry point)."""

from tamperbench.inspect_ext.scorers import exact_words_scorer, sleight_jury
from tamperbench.inspect_ext.tasks import exact_words

__all__ = ["exact_words", "exact_words_scorer", "sleight_jury"]
