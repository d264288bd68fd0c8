"""``tamperbench demo``'s resume path: a second run skips every step whose outputs are as the first run
left them (no model loaded, no record written, the same text printed), and reruns from the first step
whose outputs changed. Run on a small real Sleight of Word run and the evidence detector over it."""

from __future__ import annotations

import os

import pytest
from rich.console import Console

from tamperbench.cli import app
from tamperbench.cli.demo import demo_steps
from tamperbench.cli.demo_steps import INSTALL_ENV, Step, run_steps, step_table
from tamperbench.store import RunStore


def _steps(out):
    sleight = out / "sleight"
    return [Step("sleight", ["sleight", "run", "--preset", "demo", "--questions", "1", "--words", "1",
                             "--max-new-tokens", "16", "--device", "cpu", "--out", str(sleight)], [sleight]),
            Step("evidence", ["judge", "evidence", str(sleight)], [sleight])]


def _records(out) -> int:
    with RunStore.open_existing(out / "sleight", read_only=True) as store:
        return store.count("sleight_trials") + store.count("sleight_clean")


class Counting:
    """The real CLI app, counting the steps that reach it."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def __call__(self, argv, **kw):
        self.calls.append(argv)
        return app(argv, **kw)


@pytest.mark.model
def test_second_run_resumes_every_step_and_prints_the_same(tmp_path, capsys):
    out = tmp_path / "demo"
    first_app = Counting()
    first = run_steps(first_app, _steps(out), out, Console())
    first_text = capsys.readouterr().out
    assert len(first_app.calls) == 2 and not any(r["resumed"] for r in first)
    n = _records(out)
    assert n > 0 and first_text.strip()

    again_app = Counting()
    again = run_steps(again_app, _steps(out), out, Console())
    again_text = capsys.readouterr().out
    assert again_app.calls == [], "a resumed step must not reach its command (no model load, no recompute)"
    assert all(r["resumed"] for r in again) and _records(out) == n
    assert all(r["first_wall_s"] is not None and r["first_wall_s"] >= r["wall_s"] for r in again)
    body = lambda t: [ln for ln in t.splitlines() if "─" not in ln]  # noqa: E731  (the rules say 'resumed')
    assert body(again_text) == body(first_text)

    # An output changed since: that step and every later one run again, through their own resume.
    tables = out / "sleight" / "evidence.json"
    victim = tables if tables.exists() else next(p for p in (out / "sleight").iterdir() if p.is_file())
    os.utime(victim, ns=(1, 1))
    third_app = Counting()
    third = run_steps(third_app, _steps(out), out, Console())
    capsys.readouterr()
    assert len(third_app.calls) == 2 and not any(r["resumed"] for r in third)
    assert _records(out) == n, "the sleight run resumed what it held"


def test_step_table_shows_install_only_when_this_run_installed(monkeypatch):
    rows = [{"step": "s", "resumed": True, "wall_s": 0.1, "cpu_s": 0.1, "first_wall_s": 12.0, "first_cpu_s": 10.0}]

    def text(table) -> str:
        con = Console(width=200, record=True)
        con.print(table)
        return con.export_text()

    monkeypatch.delenv(INSTALL_ENV, raising=False)
    assert "install" not in text(step_table(rows, 0.1, 0.1))
    monkeypatch.setenv(INSTALL_ENV, "93.4")
    got = text(step_table(rows, 0.1, 0.1))
    assert "install" in got and "93.4" in got and "resumed" in got and "12.0" in got


def test_every_demo_step_that_writes_declares_its_outputs(tmp_path):
    steps = demo_steps(tmp_path, "embedded")
    suites = {s.argv[0] for s in steps}
    assert {"sleight", "judge", "quote", "owmi", "report"} <= suites
    assert any(s.argv[:2] == ["owmi", "score"] for s in steps), "owmi score's claims are part of the demo"
    for s in steps:
        assert s.outputs or s.argv[0] == "answer", s.title


@pytest.mark.model
def test_the_steps_load_the_model_once(tmp_path, monkeypatch):
    """Each step is its own CLI command in one process; they share one loaded model (``shared_backends``)
    instead of loading weights and tokenizer per command, and the sharing ends with the steps."""
    from tamperbench.models import loader, registry

    loads, real = [], loader.load_hf
    monkeypatch.setattr(loader, "load_hf", lambda *a, **k: loads.append(a) or real(*a, **k))
    out = tmp_path / "demo"
    answer = Step("answer", ["answer", "what is the capital of France?", "--max-new-tokens", "2", "--device", "cpu"],
                  [])
    rows = run_steps(Counting(), [answer, *_steps(out)], out, Console())
    assert len(rows) == 3 and _records(out) > 0
    assert len(loads) == 1, f"the model was loaded {len(loads)} times across the steps"
    assert registry._SHARED is None, "the shared backends are dropped when the steps end"
