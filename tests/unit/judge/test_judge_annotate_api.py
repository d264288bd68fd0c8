"""The annotation server's API over real HTTP (the browser test lives in tests/e2e/judge)."""

import json
import shutil
import urllib.error
import urllib.request

import pytest

from tamperbench.errors import UserError
from tamperbench.judge.annotate import AnnotationServer, prepare
from tamperbench.judge.samples import sample_rows, trial_row, write_fixture_run
from tamperbench.store import RunStore


@pytest.fixture(scope="module")
def template_run(tmp_path_factory):
    return write_fixture_run(tmp_path_factory.mktemp("annotate") / "run",
                             sample_rows() + [trial_row("u", "q?", "cup", "x", swap_count=0, untouched=True)])


@pytest.fixture
def server(tmp_path, template_run):
    run = shutil.copytree(template_run, tmp_path / "run")  # each test labels its own copy of one written run
    app = prepare(run, 3, seed=1, annotator="ann")
    srv = AnnotationServer(app, port=0)
    srv.start()
    yield srv
    srv.stop()
    app.store.close()


def call(srv, path, body=None, token=True, host=None, ctype="application/json"):
    req = urllib.request.Request(f"http://127.0.0.1:{srv.port}{path}",
                                 data=None if body is None else json.dumps(body).encode(),
                                 method="GET" if body is None else "POST")
    if token:
        req.add_header("X-Annotate-Token", srv.app.token)
    if host:
        req.add_header("Host", host)
    if body is not None:
        req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


def test_items_are_blind_and_need_the_token(server):
    status, _, body = call(server, "/api/items")
    data = json.loads(body)
    assert status == 200 and len(data["items"]) == 3
    assert set(data["items"][0]) == {"trial_key", "question", "trigger", "substitution", "reply", "label"}
    assert call(server, "/api/items", token=False)[0] == 403
    assert call(server, "/api/items", host="evil.example:80")[0] == 403


def test_page_has_csp_and_no_model_text(server):
    status, headers, body = call(server, "/", token=False)
    assert status == 200 and "script-src 'nonce-" in headers["Content-Security-Policy"]
    assert b"innerHTML" not in body and b"textContent" in body


def test_label_roundtrip_and_relabel(server, tmp_path):
    items = json.loads(call(server, "/api/items")[2])["items"]
    tk = items[0]["trial_key"]
    label = {"trial_key": tk, "flagged": True, "corrected": False, "derailed": True, "aware": False, "note": "x"}
    status, _, body = call(server, "/api/label", label)
    assert status == 200 and json.loads(body)["labelled"] == 1
    call(server, "/api/label", {**label, "aware": True})  # a relabel replaces the row
    rows = server.app.store.rows("human_labels")
    assert len(rows) == 1 and rows[0]["aware"] is True and rows[0]["annotator"] == "ann"
    assert json.loads(call(server, "/api/items")[2])["items"][0]["label"]["aware"] is True


@pytest.mark.parametrize("bad", [
    {"trial_key": "nope", "flagged": True, "corrected": True, "derailed": True, "aware": True},
    {"flagged": "yes", "corrected": True, "derailed": True, "aware": True},
    ["not", "an", "object"],
])
def test_bad_labels_rejected(server, bad):
    if isinstance(bad, dict) and "trial_key" not in bad:
        bad["trial_key"] = json.loads(call(server, "/api/items")[2])["items"][0]["trial_key"]
    assert call(server, "/api/label", bad)[0] == 400
    assert server.app.store.rows("human_labels") == []


def test_post_needs_json_and_token(server):
    assert call(server, "/api/label", {"a": 1}, ctype="text/plain")[0] == 415
    assert call(server, "/api/label", {"a": 1}, token=False)[0] == 403


def test_sample_larger_than_run(tmp_path):
    run = write_fixture_run(tmp_path / "run", sample_rows())
    with pytest.raises(UserError, match="--sample: 99 is larger than the run's 6 judgeable"):
        prepare(run, 99, seed=0, annotator="a")
    with pytest.raises(UserError, match="--sample"):
        prepare(run, 0, seed=0, annotator="a")
    with RunStore.open_existing(run) as s:
        assert "human_labels" not in s.tables()


def test_sample_is_seeded(tmp_path):
    run = write_fixture_run(tmp_path / "run", sample_rows())
    a, b = prepare(run, 3, seed=5, annotator="a"), None
    keys = [t.key for t in a.items]
    a.store.close()
    b = prepare(run, 3, seed=5, annotator="a")
    assert [t.key for t in b.items] == keys
    b.store.close()
