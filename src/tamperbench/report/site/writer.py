"""Write the files of a static site: templated pages, data scripts, figures and table exports.

Why data *scripts* and not JSON files: a page opened from disk (``file://``) may not ``fetch()``
local files in Chromium, but it may load ``<script src>``. Each chunk is a JavaScript file that calls
``tbLoad(name, payload)``; the viewer adds the script tag for a chunk when it needs it, so a run of
10,100 trials loads one question at a time instead of megabytes up front.

Every page is rendered by Jinja2 with autoescaping on: no HTML is built by string concatenation, and
model text reaches the page only through escaped template variables or the viewer's ``textContent``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from markupsafe import Markup
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from tamperbench.errors import UserError
from tamperbench.safeio.files import atomic_open, atomic_write, link_refusal
from tamperbench.report.site.tables import LeaderTable

ASSETS = ("site.css", "sort.js", "viewer.js", "quote_viewer.js")


def js_payload(payload: Any) -> str:
    """JSON that is also safe inside any HTML context (``<``, ``>``, ``&`` and U+2028/9 escaped)."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for a, b in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(a, b)
    return text


SITE_MARKER = ".tamperbench-site"  # written into every site: a folder holding it may be replaced


def _replaceable(out: Path) -> None:
    """Refuse an existing ``--out`` that is not a site of ours: rebuilding replaces the whole folder."""
    if out.is_symlink():
        raise link_refusal(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a directory")
    if out.parent.exists() and not out.parent.is_dir():
        raise UserError(f"--out {out}: cannot write the site there (Not a directory)")
    if not out.exists() or not any(out.iterdir()):
        return
    if (out / SITE_MARKER).is_file() or all((out / n).is_file() for n in ("index.html", "problems.txt")):
        return
    raise UserError(f"--out {out}: exists and is not a tamperbench report folder; the rebuild replaces "
                    "the whole folder, so give a new or empty one")


class SiteWriter:
    """Owns the output folder; everything is written below it and nowhere else.

    WHY a temporary folder: a site rebuilt into the folder of an earlier one must not keep pages of runs
    no longer in it. Pages are written into ``.<name>.building-*`` beside ``--out``; :meth:`commit`
    swaps it in (the old site is removed only after the new one is in place) and :meth:`abort`
    removes it, so a failed build leaves the old site as it was.
    """

    def __init__(self, out: Path):
        self.final = Path(out)
        try:
            _replaceable(self.final)
            self.final.parent.mkdir(parents=True, exist_ok=True)
            self.out = Path(tempfile.mkdtemp(prefix=f".{self.final.name[:60]}.building-", dir=self.final.parent))
        except OSError as err:
            raise UserError(f"--out {out}: cannot write the site there ({err.strerror or err})") from None
        (self.out / SITE_MARKER).write_text("")
        self.env = Environment(loader=PackageLoader("tamperbench.report", "templates"),
                               autoescape=select_autoescape(default=True, default_for_string=True),
                               undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        # Safe to mark as markup: js_payload escapes every character that could end a script or a tag.
        self.env.filters["tojs"] = lambda value: Markup(js_payload(value))
        self.bytes_written = 0

    def commit(self) -> Path:
        """Put the built site at ``--out`` (replacing an earlier site there); returns ``--out``."""
        old = None
        try:
            if self.final.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{self.final.name[:60]}.old-", dir=self.final.parent))
                os.replace(self.final, old / "site")
            os.replace(self.out, self.final)
        except OSError as err:
            if old is not None and (old / "site").exists() and not self.final.exists():
                os.replace(old / "site", self.final)
            self.abort()
            raise UserError(f"--out {self.final}: cannot put the site there ({err.strerror or err})") from None
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return self.final

    def abort(self) -> None:
        shutil.rmtree(self.out, ignore_errors=True)

    def path(self, rel: str) -> Path:
        target = (self.out / rel).resolve()
        if not str(target).startswith(str(self.out.resolve()) + os.sep):
            raise ValueError(f"refusing to write outside the site folder: {rel}")
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def write_text(self, rel: str, text: str) -> Path:
        p = self.path(rel)
        atomic_write(p, text)
        self.bytes_written += len(text.encode())
        return p

    def render(self, template: str, rel: str, **context: Any) -> Path:
        depth = rel.count("/")
        context.setdefault("root", "../" * depth)
        return self.write_text(rel, self.env.get_template(template).render(**context))

    def data_script(self, rel: str, name: str, payload: Any) -> str:
        """Write ``tbLoad(name, payload)`` to ``rel`` (a ``.js`` path); returns rel for a script tag."""
        self.write_text(rel, f"tbLoad({json.dumps(name)},{js_payload(payload)});\n")
        return rel

    def figure(self, fig, stem: str) -> dict:
        """Save a matplotlib figure as SVG and PNG under ``plots/``; returns their relative paths."""
        import matplotlib.pyplot as plt

        paths = {}
        for ext in ("svg", "png"):
            with atomic_open(self.path(f"plots/{stem}.{ext}"), "wb") as fh:
                fig.savefig(fh, format=ext, dpi=110, bbox_inches="tight")
            paths[ext] = f"plots/{stem}.{ext}"
        plt.close(fig)
        return paths

    def export_table(self, table: LeaderTable) -> dict:
        """``tables/<slug>.md/.csv/.tex``; returns the relative paths for download links."""
        links = {}
        for ext, text in (("md", table.to_markdown()), ("csv", table.to_csv()), ("tex", table.to_latex())):
            links[ext] = f"tables/{table.slug}.{ext}"
            self.write_text(links[ext], text)
        return links

    def copy_assets(self) -> None:
        from importlib.resources import files

        static = files("tamperbench.report") / "static"
        for name in ASSETS:
            self.write_text(f"static/{name}", (static / name).read_text(encoding="utf-8"))
