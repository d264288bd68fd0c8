"""Spec files are checked by the spec's field constraints before anything is created or loaded.

Each bad value below must give one stderr line naming the file and the field, exit status 2, and
leave no run directory behind (issue 15 item 7: ``window: -3`` and ``topk: 0`` used to be accepted).
"""

from __future__ import annotations

import json

import pytest

from tamperbench.quote.runner import QuoteRunSpec
from tamperbench.sleight.spec import build_spec


def _sleight() -> dict:
    return build_spec(model="embedded", preset="quick", questions=1, words=1, max_new_tokens=8).model_dump(mode="json")


CASES = [
    (_sleight, {"window": -3}, "window"),
    (_sleight, {"topk": 0}, "topk"),
    (_sleight, {"max_new_tokens": 0}, "max_new_tokens"),
    (_sleight, {"questions": []}, "questions"),
    (_sleight, {"triggers": ["two words"]}, "triggers.0"),
    (_sleight, {"batch_size": 0}, "batch_size"),
    (_sleight, {"decoding": "sampled"}, "decoding"),
    (lambda: QuoteRunSpec().model_dump(mode="json"), {"repeats": 0}, "repeats"),
    (lambda: QuoteRunSpec().model_dump(mode="json"), {"arms": ["loose"]}, "arms.0"),
    (lambda: QuoteRunSpec().model_dump(mode="json"), {"item_ids": ["K99"]}, "item_ids"),
    (lambda: QuoteRunSpec().model_dump(mode="json"), {"preset": "long"}, "preset"),
]


@pytest.mark.parametrize("base, change, field", CASES, ids=[f"{c[2]}={list(c[1].values())[0]}" for c in CASES])
def test_bad_spec_field_is_refused_before_the_run_dir_exists(tmp_path, tb_inprocess, base, change, field):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**base(), **change}))
    out = tmp_path / "run"
    proc = tb_inprocess("run", spec, "--out", out)  # the entry point in-process (the subprocess route: test_cli_errors)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"error: {spec}: field '{field}'"), lines[0]
    assert not out.exists()


def test_specs_are_frozen():
    spec = build_spec(model="embedded", preset="quick", questions=1, words=1, max_new_tokens=8)
    for obj, name in ((spec, "window"), (QuoteRunSpec(), "repeats")):
        with pytest.raises(Exception, match="frozen"):
            setattr(obj, name, 5)
