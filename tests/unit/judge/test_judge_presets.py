"""``judge run --preset``: what each preset fixes, and that every option overrides it (issue 27, items 1-3).

``paper`` = the reference's jury: ``SamplingParams(temperature=0.0, max_tokens=256)`` in
``scripts/panel_judge.py`` of fractalego/Sleight-of-Word, its ``_verdict_from`` parse, its
``tokenizer.decode(assistant_ids)`` text, the prompt byte for byte and ``panel_combine``'s unparsed-as-no.
Red before the change: ``--preset paper`` kept 160 tokens, the robust parse and the safe text.
"""

from __future__ import annotations

import pytest

from tamperbench.errors import UserError
from tamperbench.judge.presets import judge_config


def test_paper_preset_is_the_reference_jury():
    cfg = judge_config("paper", ["a", "b"])
    assert (cfg.max_new_tokens, cfg.fence, cfg.unparsed, cfg.parse, cfg.judged_text, cfg.temperature) == \
        (256, "paper", "false", "reference", "reference", 0.0)
    assert cfg.thinking == ()  # each template's default unless --thinking says otherwise
    d = judge_config("default", ["a"])
    assert (d.max_new_tokens, d.fence, d.unparsed, d.parse, d.judged_text) == (160, "nonce", "abstain", "robust", "safe")


def test_options_override_the_preset_and_bad_values_are_one_line():
    cfg = judge_config("paper", ["a", "b"], parse="robust", max_new_tokens=64, thinking=["b=off"])
    assert (cfg.parse, cfg.max_new_tokens, cfg.judged_text, cfg.thinking) == ("robust", 64, "reference", (("b", "off"),))
    with pytest.raises(UserError, match="^--preset: 'exact' is not one of default, paper$"):
        judge_config("exact", ["a"])
    with pytest.raises(UserError, match="^--parse: "):
        judge_config("default", ["a"], parse="loose")
    with pytest.raises(UserError, match="^--judged-text: "):
        judge_config("default", ["a"], judged_text="raw")
    with pytest.raises(UserError, match="^--max-new-tokens: "):
        judge_config("paper", ["a"], max_new_tokens=4)
