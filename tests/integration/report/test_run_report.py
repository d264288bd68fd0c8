"""The static report over a real (tiny) Sleight of Word run and a real Exact Words run."""

from __future__ import annotations

import pytest

from tamperbench.quote.runner import QuoteRunSpec, run_quote
from tamperbench.report.run_report import build_report
from tamperbench.sleight.presets import build_spec
from tamperbench.sleight.runner import run as run_sleight

pytestmark = pytest.mark.model


def test_report_has_plots_tables_and_escapes_model_text(tmp_path, embedded_backend):
    spec = build_spec(model="embedded", preset="quick", questions=1, words=2, max_new_tokens=24, device="cpu")
    run_sleight(spec, tmp_path / "sleight", backend=embedded_backend)
    qspec = QuoteRunSpec(model="embedded", arms=["plain"], max_new_tokens=16, device="cpu",
                         item_ids=["S01", "S02"]).check()
    run_quote(qspec, tmp_path / "quote", backend=embedded_backend).close()
    index = build_report([tmp_path / "sleight", tmp_path / "quote"], tmp_path / "report")
    out = tmp_path / "report"
    for png in ("sleight_swap_profile.png", "quote_categories.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = index.read_text()
    assert "Sleight of Word" in page and "Exact Words" in page
    assert "<script" not in page.lower(), "model text must be escaped, and the page ships no script"
    md = (out / "report.md").read_text()
    assert "swaps in all" in md and "![swap profile](sleight_swap_profile.png)" in md
