"""The annotation page end to end in Debian's headless Chromium, driven by Playwright.

Starts the real CLI (`tamperbench judge annotate ... --exit-when-done`) as a subprocess, labels every
sampled reply through the page, and checks that (a) the labels land in the run database, (b) a reply
carrying <script> and <b> markup is shown as literal text, with no element created and no script run.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tamperbench.judge.samples import SAMPLES, sample_rows, write_fixture_run
from tamperbench.store import RunStore

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed at /usr/bin/chromium")]


def start_cli(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "tamperbench.cli", "judge", "annotate", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    for _ in range(50):
        line = proc.stdout.readline()
        if line.startswith("annotation page: "):
            return proc, line.split(": ", 1)[1].strip()
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"annotate did not start: {proc.stderr.read()}")


def test_label_every_reply_in_chromium(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    run = write_fixture_run(tmp_path / "run", sample_rows())
    proc, url = start_cli(str(run), "--sample", str(len(SAMPLES)), "--port", "0", "--annotator", "tester",
                          "--exit-when-done")
    by_reply = {s.reply: s for s in SAMPLES}
    dialogs: list[str] = []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            page = browser.new_page()
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(url)
            seen_markup_reply = False
            for i in range(len(SAMPLES)):
                page.wait_for_selector("#item:not([hidden])")
                expect(page.locator("#status")).to_have_text(f"Reply {i + 1} of {len(SAMPLES)}")
                shown = page.evaluate("document.getElementById('reply').textContent")
                sample = by_reply[shown]  # the exact reply text, byte for byte
                if "<script>" in sample.reply:
                    seen_markup_reply = True
                    assert page.locator("#reply *").count() == 0  # no <b>, no <script> element created
                    assert "<b>bold</b>" in page.inner_text("#reply")
                    assert page.evaluate("document.scripts.length") == 1  # only the page's own script
                for label, value in sample.labels.items():
                    page.set_checked(f"#{label}", value)
                page.fill("#note", f"sample {sample.name}")
                page.click("#save")
            expect(page.locator("#status")).to_have_text(f"All {len(SAMPLES)} replies labelled. You can close this page.")
            assert page.inner_text("#progress") == f"{len(SAMPLES)} / {len(SAMPLES)} labelled"
            assert seen_markup_reply and dialogs == []
            browser.close()
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert f"{len(SAMPLES)} of {len(SAMPLES)} sampled replies labelled by tester" in out
    with RunStore.open_existing(run) as store:
        rows = store.rows("human_labels")
    keys = {r.key: r.reaction_text for r in sample_rows()}
    assert len(rows) == len(SAMPLES)
    for r in rows:
        sample = by_reply[keys[r["trial_key"]]]
        assert {k: r[k] for k in sample.labels} == sample.labels
        assert r["annotator"] == "tester" and r["note"] == f"sample {sample.name}"
