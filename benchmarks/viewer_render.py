"""Time to first render and bytes loaded: the lazy trial viewer vs one page with every trial inlined.

Generates a synthetic Sleight of Word run at the paper preset's scale (100 questions x 101 words =
10,100 trials, 256 tokens each; real record classes and store, no model), builds the site, and opens
both pages from disk (file://) in Debian's headless Chromium. The inline page is what the reference
publishes: the same data, every chunk pasted into one HTML file.

    .venv/bin/python benchmarks/viewer_render.py [--questions 100 --words 101 --tokens 256]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def inline_page(site: Path) -> Path:
    """The viewer with every data script pasted inline (the one-big-file baseline)."""
    page = (site / "viewer" / "sleight-0.html").read_text()
    chunks = sorted((site / "data" / "sleight-0").glob("q*.js"))
    inline = "".join(f"<script>{p.read_text()}</script>" for p in chunks)
    idx = '<script src="../data/sleight-0/index.js"></script>'
    assert idx in page
    out = site / "viewer" / "inline-0.html"
    out.write_text(page.replace(idx, f"<script>{(site / 'data/sleight-0/index.js').read_text()}</script>{inline}"))
    return out


def measure(browser, url: str) -> tuple[float, int]:
    page = browser.new_page()
    loaded: list[str] = []
    page.on("requestfinished", lambda r: loaded.append(r.url))
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_function("Number(document.getElementById('trials').getAttribute('data-rendered')) > 0",
                           timeout=120_000)
    elapsed = time.perf_counter() - start
    page.close()
    size = sum(Path(u.removeprefix("file://")).stat().st_size for u in set(loaded) if u.startswith("file://"))
    return elapsed, size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--words", type=int, default=101)
    ap.add_argument("--tokens", type=int, default=256)
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright

    from tamperbench.report.site import build_site
    from tamperbench.sleight.synthetic import write_synthetic_run

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run = write_synthetic_run(Path(tmp) / "run", questions=a.questions, words=a.words, tokens=a.tokens)
        t1 = time.perf_counter()
        index, _ = build_site([run], Path(tmp) / "site")
        t2 = time.perf_counter()
        site = index.parent
        inline = inline_page(site)
        n = a.questions * a.words
        print(f"{n} trials x {a.tokens} tokens: run written in {t1 - t0:.1f} s, site built in {t2 - t1:.1f} s")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            lazy_t, lazy_b = measure(browser, (site / "viewer" / "sleight-0.html").as_uri())
            inl_t, inl_b = measure(browser, inline.as_uri())
            browser.close()
        print(f"lazy viewer : first render {lazy_t:6.2f} s, {lazy_b / 1e6:7.2f} MB loaded")
        print(f"inline page : first render {inl_t:6.2f} s, {inl_b / 1e6:7.2f} MB loaded")
        print(f"ratio inline/lazy: time {inl_t / lazy_t:.1f}x, bytes {inl_b / lazy_b:.1f}x")


if __name__ == "__main__":
    main()
