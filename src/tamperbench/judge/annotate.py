"""``judge annotate``: a small local page where a person labels sampled replies, blind to the jury.

WHY stdlib ``http.server``: one person, a few hundred requests, no new dependency. Safety, since the
page shows untrusted model text and listens on a port:

* it binds 127.0.0.1 only and rejects requests whose ``Host`` is not that address (DNS rebinding);
* the API needs a per-session random token (printed in the URL, like Jupyter), so another web page
  open in the same browser cannot read replies or post labels;
* model text is put on the page with ``textContent`` only, and a strict Content-Security-Policy
  allows just the page's own nonce-tagged script and style, so even a reply carrying ``<script>``
  could not run;
* the API never sends a judge vote or verdict: the annotator is blind to the jury.

Labels are written to ``human_labels`` in the run database (one row per trial and annotator; a
relabel replaces the row in one transaction).
"""

from __future__ import annotations

import json
import random
import re
import secrets
import threading
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

from tamperbench.errors import UserError
from tamperbench.judge.prompt import LABELS
from tamperbench.judge.records import HumanLabelRecord, SleightTrial, read_sleight_trials, replace_rows
from tamperbench.judge.runner import open_run, split_trials
from tamperbench.store import RunStore, trial_key

MAX_BODY = 64 * 1024
_DIGITS = re.compile(r"[0-9]+")


def sample_trials(trials: Sequence[SleightTrial], n: int, seed: int) -> list[SleightTrial]:
    """A seeded sample of ``n`` judgeable trials (stable for the same run and seed)."""
    judgeable, _, _ = split_trials(trials)
    if n < 1:
        raise UserError(f"--sample: must be at least 1, got {n}")
    if n > len(judgeable):
        raise UserError(f"--sample: {n} is larger than the run's {len(judgeable)} judgeable replies "
                        f"({len(trials)} sleight records in all)")
    ordered = sorted(judgeable, key=lambda t: t.key)
    return random.Random(seed).sample(ordered, n)


def label_key(trial: str, annotator: str) -> str:
    return trial_key({"trial_key": trial, "annotator": annotator})


class AnnotationApp:
    """State shared by request handlers: the store (behind a lock), the sample, the token."""

    def __init__(self, store: RunStore, items: Sequence[SleightTrial], *, annotator: str, seed: int):
        if not annotator.strip():
            raise UserError("--annotator: must not be empty")
        self.store, self.items, self.annotator, self.seed = store, list(items), annotator, seed
        self.by_key = {t.key: t for t in self.items}
        self.token = secrets.token_urlsafe(24)
        self.nonce = secrets.token_urlsafe(16)
        self.lock = threading.Lock()
        self.store.ensure_table("human_labels", HumanLabelRecord)
        page = resources.files("tamperbench.judge").joinpath("data/annotate.html").read_text(encoding="utf-8")
        self.page = page.replace("__NONCE__", self.nonce).encode("utf-8")

    def labels(self) -> dict[str, dict]:
        with self.lock:
            rows = self.store.rows("human_labels", "WHERE annotator = ?", [self.annotator])
        return {r["trial_key"]: {k: r[k] for k in (*LABELS, "note")} for r in rows if r["trial_key"] in self.by_key}

    def items_payload(self) -> dict:
        have = self.labels()
        return {"annotator": self.annotator, "items": [
            {"trial_key": t.key, "question": t.question, "trigger": t.trigger, "substitution": t.substitution,
             "reply": t.reaction_text, "label": have.get(t.key)} for t in self.items]}

    def save(self, body: object) -> dict:
        if not isinstance(body, dict):
            raise ValueError("body must be a JSON object")
        tk = body.get("trial_key")
        if tk not in self.by_key:
            raise ValueError("trial_key is not in this annotation sample")
        values = {}
        for lab in LABELS:
            if not isinstance(body.get(lab), bool):
                raise ValueError(f"{lab} must be true or false")
            values[lab] = body[lab]
        note = body.get("note", "")
        if not isinstance(note, str) or len(note) > 2000:
            raise ValueError("note must be a string of at most 2000 characters")
        key = label_key(tk, self.annotator)
        rec = HumanLabelRecord(key=key, trial_key=tk, annotator=self.annotator, note=note, sample_seed=self.seed,
                               **values)
        with self.lock:
            replace_rows(self.store, "human_labels", HumanLabelRecord, [rec], where="key = ?", params=[key])
        return {"ok": True, "labelled": len(self.labels()), "total": len(self.items)}

    def all_done(self) -> bool:
        return len(self.labels()) == len(self.items)


def _handler(app: AnnotationApp, host_ok: set[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "tamperbench-annotate"
        timeout = 30  # a client that declares a body and never sends it cannot hold a thread forever

        def log_message(self, fmt: str, *args: object) -> None:  # keep the terminal quiet
            return

        def _send(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("X-Frame-Options", "DENY")
            self.send_header("Content-Security-Policy",
                             f"default-src 'none'; script-src 'nonce-{app.nonce}'; style-src 'nonce-{app.nonce}'; "
                             "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, obj: object) -> None:
            self._send(status, json.dumps(obj).encode("utf-8"), "application/json; charset=utf-8")

        def _guard(self, api: bool) -> bool:
            if self.headers.get("Host", "") not in host_ok:
                self._json(HTTPStatus.FORBIDDEN, {"error": "unexpected Host header"})
                return False
            if api and not secrets.compare_digest(self.headers.get("X-Annotate-Token", ""), app.token):
                self._json(HTTPStatus.FORBIDDEN, {"error": "missing or wrong token"})
                return False
            return True

        def _body_length(self) -> int | None:
            """The declared body size, or None after answering 400/411/413.

            Only ASCII digits are a length (``int()`` would take "-1", " 12", "1_0" or an Arabic-Indic digit):
            a negative length once made ``rfile.read(-1)`` read an unbounded body past the cap.
            """
            values = self.headers.get_all("Content-Length") or []
            if not values:
                self.close_connection = True
                self._json(HTTPStatus.LENGTH_REQUIRED, {"error": "Content-Length is required"})
                return None
            if len(values) > 1 or not _DIGITS.fullmatch(values[0]):
                self.close_connection = True
                self._json(HTTPStatus.BAD_REQUEST, {"error": "Content-Length must be one non-negative integer"})
                return None
            if len(values[0]) > 12 or int(values[0]) > MAX_BODY:
                self.close_connection = True
                self._json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": f"body larger than {MAX_BODY} bytes"})
                return None
            return int(values[0])

        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            path = urlsplit(self.path).path
            if path == "/":
                if self._guard(api=False):
                    self._send(HTTPStatus.OK, app.page, "text/html; charset=utf-8")
            elif path == "/api/items":
                if self._guard(api=True):
                    self._json(HTTPStatus.OK, app.items_payload())
            else:
                self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})

        def do_POST(self) -> None:  # noqa: N802
            if urlsplit(self.path).path != "/api/label":
                self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})
                return
            if not self._guard(api=True):
                return
            if not self.headers.get("Content-Type", "").startswith("application/json"):
                self._json(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, {"error": "send application/json"})
                return
            length = self._body_length()
            if length is None:
                return
            try:
                body = json.loads(self.rfile.read(length) or b"null")
                self._json(HTTPStatus.OK, app.save(body))
            except (ValueError, UnicodeDecodeError) as err:
                self._json(HTTPStatus.BAD_REQUEST, {"error": str(err)})

    return Handler


class AnnotationServer:
    """The page and API on 127.0.0.1; ``port=0`` picks a free port."""

    def __init__(self, app: AnnotationApp, *, port: int = 0):
        if not 0 <= port <= 65535:
            raise UserError(f"--port: must be between 0 and 65535, got {port}")
        self.app = app
        try:
            self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(app, set()))
        except OSError as err:
            raise UserError(f"--port: cannot listen on 127.0.0.1:{port} ({err.strerror})") from None
        self.port = self.httpd.server_address[1]
        self.httpd.RequestHandlerClass = _handler(app, {f"127.0.0.1:{self.port}", f"localhost:{self.port}"})
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/?token={self.app.token}"

    def start(self) -> str:
        # stop() returns within one poll interval (shutdown() waits for the loop to look): 50 ms answers a
        # Ctrl+C at once for twenty idle wake-ups a second (0.2 s made every test's teardown 0.2 s).
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self.url

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def prepare(run_dir: Path, sample: int, *, seed: int, annotator: str) -> AnnotationApp:
    """Validate everything (run, records, sample size) before anything is written or served."""
    store = open_run(run_dir)
    try:
        items = sample_trials(read_sleight_trials(store), sample, seed)
        return AnnotationApp(store, items, annotator=annotator, seed=seed)
    except BaseException:
        store.close()
        raise
