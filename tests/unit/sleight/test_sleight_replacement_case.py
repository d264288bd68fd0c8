"""``--replacement-case``: the replacement follows the trigger's case pattern only when asked (issue 27, item 7).

The reference's ``encode_replacement`` (``src/awareness/tokens.py`` of fractalego/Sleight-of-Word)
capitalises the first letter when ``word[0].isupper()`` and does nothing else, so the trigger ``THE``
becomes ``Scarf``, not ``SCARF``; tamperbench's README said the replacement "keeps the case pattern".
Under the reference rules that stays the default; ``pattern`` is the named option. Real SmolLM2 token
ids. Red before the change: ``TriggerDetector`` had no ``replacement_case`` and ``THE`` always gave Scarf.
"""

from __future__ import annotations

import pytest

from tamperbench.errors import UserError
from tamperbench.sleight.detector import TriggerDetector
from tamperbench.sleight.spec import build_spec
from tamperbench.sleight.records import trial_record_key


def _swap(det: TriggerDetector, tok, surface: str, word: str = "scarf") -> str:
    (tid,) = tok.encode(surface, add_special_tokens=False)
    of = tok.encode(" of", add_special_tokens=False)[0]
    occ = det.classify(tok.encode(" is", add_special_tokens=False)[0], tid, of)
    assert occ.kind == "swap", occ
    return tok.decode(det.replacement_ids(occ, word, None))


def test_reference_keeps_scarf_pattern_gives_scarf_in_capitals(embedded_tokenizer):
    tok = embedded_tokenizer
    ref = TriggerDetector(tok, rules="reference")
    assert ref.case == "first-letter"
    assert [_swap(ref, tok, s) for s in (" the", " The", " THE")] == [" scarf", " Scarf", " Scarf"]
    pattern = TriggerDetector(tok, rules="reference", replacement_case="pattern")
    assert [_swap(pattern, tok, s) for s in (" the", " The", " THE")] == [" scarf", " Scarf", " SCARF"]
    assert TriggerDetector(tok, rules="appendix-c").case == "pattern"  # appendix-c implied it already
    assert _swap(TriggerDetector(tok, rules="appendix-c", replacement_case="first-letter"), tok, " THE") == " Scarf"
    with pytest.raises(UserError, match="^--replacement-case: 'upper' is not one of first-letter, pattern$"):
        TriggerDetector(tok, replacement_case="upper")


def test_the_option_is_in_the_spec_and_keys_only_when_set():
    default = build_spec(model="embedded", preset="quick")
    pattern = build_spec(model="embedded", preset="quick", replacement_case="pattern")
    assert default.replacement_case is None and pattern.replacement_case == "pattern"
    key = trial_record_key("p", "q000", "q", "scarf", default)
    assert key == trial_record_key("p", "q000", "q", "scarf", build_spec(model="embedded", preset="quick"))
    assert key != trial_record_key("p", "q000", "q", "scarf", pattern)
    with pytest.raises(UserError, match="^--replacement-case: "):
        build_spec(model="embedded", preset="quick", replacement_case="upper")
