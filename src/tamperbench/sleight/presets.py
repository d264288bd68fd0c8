"""Old home of the Sleight of Word spec and presets, kept so ``tamperbench.sleight.presets`` imports keep
working for one release: the spec is now in :mod:`tamperbench.sleight.spec`, the protocol data and the
presets in :mod:`tamperbench.sleight.protocol`."""

from __future__ import annotations

import warnings

from tamperbench.sleight.protocol import (ENTITY, PRESETS, QUICK_QUESTIONS, QUICK_WORDS, TOPK, WINDOW, Preset,
                                          entity_phrase, get_preset, protocol_questions, protocol_words)
from tamperbench.sleight.spec import SleightSpec, build_spec

__all__ = ["ENTITY", "PRESETS", "QUICK_QUESTIONS", "QUICK_WORDS", "TOPK", "WINDOW", "Preset", "SleightSpec",
           "build_spec", "entity_phrase", "get_preset", "protocol_questions", "protocol_words"]

warnings.warn("tamperbench.sleight.presets is deprecated: import the spec from tamperbench.sleight.spec and the "
              "presets from tamperbench.sleight.protocol", DeprecationWarning, stacklevel=2)
