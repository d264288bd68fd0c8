"""Explicit token positions ('0,1,2', the known positive's Section 7.2 positions) in an OWMI spec."""

from __future__ import annotations

import pytest

from tamperbench.errors import UserError
from tamperbench.owmi.engine.contexts import _declared
from tamperbench.owmi.run.spec import parse_spec, quick_spec


def test_explicit_positions_parse_and_normalise():
    assert quick_spec(positions="2,0,1,1").positions == "0,1,2"
    assert quick_spec(positions="task").positions == "task"
    for bad in ("0-2", "first", "1,,2", "-1"):
        with pytest.raises(UserError, match="positions: .*comma-separated token indices"):
            parse_spec({**quick_spec().model_dump(mode="json"), "positions": bad})


def test_explicit_positions_are_the_declared_prefill_positions():
    offsets = [(i, i + 1) for i in range(12)]
    assert _declared(offsets, 5, 9, 10, "0,1,2") == [0, 1, 2]  # wherever the task text is
    assert _declared(offsets, 5, 9, 10, "1,10,11") == [1]  # positions at or after the probe split are not prefill
    assert _declared(offsets, 5, 9, 10, "task") == [5, 6, 7, 8]
