"""The static report site in Debian's headless Chromium, opened from disk (file://), driven by Playwright.

Runs are synthetic (written through the real record classes and store; no model): the site must be
checked on hostile replies and on several models, which a CPU run of the embedded model cannot give in
seconds. Screenshots of every page are kept under ``test-artifacts/site/``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tamperbench.quote.runner import QuoteRunSpec, QuoteTrial
from tamperbench.report.site import build_site
from tamperbench.sleight.synthetic import synthetic_provenance, write_synthetic_run
from tamperbench.store import RunStore, trial_key

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "site"
HOSTILE = ['<script>window.__pwned=1;alert(1)</script>', '<img src=x onerror="window.__pwned=2">',
           'end</script><script>window.__pwned=3</script>']

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed at /usr/bin/chromium")]


def quote_run(path: Path, hostile: str) -> Path:
    spec = QuoteRunSpec(model="synthetic-quote-model")
    with RunStore.open(path, spec, new=True) as store:
        store.ensure_table("quote_trials", QuoteTrial)
        pid = store.put_provenance(synthetic_provenance("synthetic-quote-model"))
        rows = []
        for i, (cat, resp) in enumerate([("faithful", "The gold sentence."), ("rewritten", hostile),
                                         ("corrected", "The gold sentense fixed.")]):
            rows.append(QuoteTrial(
                key=trial_key({"i": i}), provenance_id=pid, model="synthetic-quote-model", preset="standard",
                item_id=f"item{i}", doc_id="memo", arm="plain" if i % 2 == 0 else "strict", repeat=0, dirty=i == 2,
                gold="The gold sentence.", instruction="Quote it.", prompt_text="p", n_prompt_tokens=3,
                response=resp, n_new_tokens=5, finish_reason="eos", temperature=0.0, seed=0, sample_index=i,
                max_new_tokens=64, batch_size=1, answer=resp, category=cat, evidence={"where": hostile}))
        store.write("quote_trials", rows)
    return path


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("site")
    a = write_synthetic_run(tmp / "alpha", questions=3, words=3, seed=1, model="alpha-model",
                            replies={i: HOSTILE[i] for i in range(3)})
    b = write_synthetic_run(tmp / "beta", questions=3, words=3, seed=7, model="beta-model",
                            question_text=HOSTILE[0] + " question?")
    q = quote_run(tmp / "quote", HOSTILE[1] + HOSTILE[2])
    index, problems = build_site([a, b, q], tmp / "out")
    assert problems == []
    return index.parent


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


def open_page(browser, url: str, shot: str):
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    dialogs: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(url)
    page.wait_for_load_state("load")
    page.wait_for_timeout(300)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
    return page, errors, dialogs


def column_values(page, table_id: str, header: str) -> list[str]:
    heads = page.locator(f"#{table_id} thead th").all_inner_texts()
    col = [h.strip() for h in heads].index(header)
    return page.locator(f"#{table_id} tbody tr td:nth-child({col + 1})").all_inner_texts()


def lead(values: list[str]) -> list[float]:
    return [float(re.match(r"[+-]?\d+(\.\d+)?", v).group()) for v in values]


def test_leaderboard_sorts_and_plots_load(site, browser):
    page, errors, dialogs = open_page(browser, (site / "index.html").as_uri(), "index.png")
    before = column_values(page, "t-sleight-table1", "Model")
    assert sorted(before) == ["alpha-model", "beta-model"]
    page.click("#t-sleight-table1 th:has-text('Δ surp. (nats)')")
    first = lead(column_values(page, "t-sleight-table1", "Δ surp. (nats)"))
    page.click("#t-sleight-table1 th:has-text('Δ surp. (nats)')")
    second = lead(column_values(page, "t-sleight-table1", "Δ surp. (nats)"))
    assert first != second, "the two models must differ for the sort to be visible"
    assert sorted(first) in (first, first[::-1]) and second == first[::-1]
    assert page.get_attribute("#t-sleight-table1 th:has-text('Δ surp. (nats)')", "aria-sort") in ("ascending", "descending")
    imgs = page.locator("img")
    assert imgs.count() >= 3  # deltas, swap-aligned, taxonomy (entity-vs-words is drawn only once judged)
    widths = page.evaluate("Array.from(document.images).map(i => i.complete ? i.naturalWidth : 0)")
    assert all(w > 0 for w in widths), widths
    assert errors == [] and dialogs == []
    page.click("#s-sleight p.runs-of a:has-text('alpha-model (alpha)')")
    page.wait_for_load_state("load")
    assert "sha256" in page.inner_text("body") and "synthetic" in page.inner_text("body")
    page.screenshot(path=str(ARTIFACTS / "run.png"), full_page=True)


def test_viewer_filters_and_loads_one_question_at_a_time(site, browser):
    page, errors, dialogs = open_page(browser, (site / "viewer" / "sleight-0.html").as_uri(), "viewer.png")
    assert page.inner_text("#count") == "9 of 9 trials match"
    page.select_option("#f-word", label="word1")
    page.wait_for_function("document.getElementById('trials').getAttribute('data-rendered') === '3'")
    assert page.inner_text("#count") == "3 of 9 trials match"
    words = page.evaluate("Array.from(document.querySelectorAll('article.trial')).map(a => a.dataset.word)")
    assert words == ["word1"] * 3
    page.select_option("#f-word", label="all")
    page.select_option("#f-question", index=2)  # the second question only
    page.wait_for_function("document.getElementById('trials').getAttribute('data-rendered') === '3'")
    assert page.inner_text("#count") == "3 of 9 trials match"
    page.select_option("#f-label", "flagged")  # nothing is judged in a synthetic run
    page.wait_for_function("document.getElementById('trials').getAttribute('data-rendered') === '0'")
    assert page.inner_text("#count") == "0 of 9 trials match"
    assert errors == [] and dialogs == []


def test_lazy_chunks(site, browser):
    page, _, _ = open_page(browser, (site / "viewer" / "sleight-0.html").as_uri(), "viewer-lazy.png")
    page.select_option("#f-question", index=3)
    page.wait_for_function("document.getElementById('trials').getAttribute('data-rendered') === '3'")
    # The initial render asked for the first 25 trials (all 3 questions here); a fresh page filtered to one
    # question before anything rendered would load one chunk: check the chunk scripts exist per question.
    assert sorted(p.name for p in (site / "data" / "sleight-0").glob("q*.js")) == ["q00000.js", "q00001.js", "q00002.js"]


@pytest.mark.parametrize("page_path", ["index.html", "viewer/sleight-0.html", "viewer/sleight-1.html",
                                       "viewer/quote.html", "runs/run-0.html", "runs/run-1.html"])
def test_hostile_text_renders_as_text_and_runs_nothing(site, browser, page_path):
    page, errors, dialogs = open_page(browser, (site / page_path).as_uri(),
                                      "xss-" + page_path.replace("/", "-").replace(".html", ".png"))
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned === undefined"), "a script from the data ran"
    assert dialogs == [] and errors == []
    own = page.evaluate("Array.from(document.scripts).map(s => s.src.split('/').slice(-2).join('/'))")
    assert all(s.startswith(("static/", "sleight-", "quote/")) or s == "" for s in own), own
    assert page.evaluate("document.querySelectorAll('img[onerror], main img:not([src$=\".svg\"])').length") == 0
    text = page.inner_text("body")
    if page_path in ("viewer/sleight-0.html", "viewer/quote.html"):
        assert "<script>" in text or "onerror" in text  # shown literally


def test_quote_viewer_shows_gold_answer_verdict_and_evidence(site, browser):
    page, errors, _ = open_page(browser, (site / "viewer" / "quote.html").as_uri(), "quote.png")
    assert page.inner_text("#count") == "3 of 3 responses"
    page.select_option("#f-category", "corrected")
    body = page.inner_text("#responses")
    assert "The gold sentense fixed." in body and "The gold sentence." in body and "corrected" in body
    assert page.locator("article.trial").count() == 1
    assert errors == []
