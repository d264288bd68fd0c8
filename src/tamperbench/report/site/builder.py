"""``tamperbench report RUN [RUN ...] --out SITE``: a static site in one folder.

Why the runs are checked one by one: a site over dozens of runs should not fail because one folder is
not a run, is empty, or was written by another schema version. Each problem becomes one line on the
index page (and in the returned list); the site still builds for the valid runs.
"""

from __future__ import annotations

import json
from pathlib import Path

from tamperbench.errors import UserError
from tamperbench.report.site.model import RunInfo, Section
from tamperbench.report.site.writer import SiteWriter

SUITE_ORDER = ("sleight", "quote", "owmi")


def section_builder(suite: str):
    """The suite's site-section function from the suite registry (its ``report`` part); None if it has none."""
    from tamperbench.suites import registered

    entry = registered().get(suite)
    return None if entry is None or entry.report is None else entry.part("report")


def read_run(path: Path, index: int) -> RunInfo:
    """Open a run read-only and describe it; any problem is a UserError naming the folder."""
    from tamperbench.export.tables import INTERNAL
    from tamperbench.store import RunStore
    from tamperbench.store.run_store import DB_FILE, SCHEMA_VERSION, SPEC_FILE, read_spec
    from tamperbench.store.sessions import read_sessions

    if not path.is_dir():
        raise UserError(f"{path}: not a directory")
    if not (path / SPEC_FILE).is_file() or not (path / DB_FILE).is_file():
        raise UserError(f"{path}: not a tamperbench run (no {SPEC_FILE} and {DB_FILE})")
    spec = read_spec(path / SPEC_FILE)  # capped in size; garbage is one line naming the file
    if not isinstance(spec, dict) or not isinstance(spec.get("suite"), str):
        raise UserError(f"{path / SPEC_FILE}: field 'suite' is missing")
    store = RunStore.open_existing(path, read_only=True)
    try:
        counts = {t: store.count(t) for t in store.tables() if t not in INTERNAL}
        versions = set()
        for table in counts:
            cols = {c for (c,) in store.con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table]).fetchall()}
            if "schema_version" in cols and counts[table]:
                versions |= {v for (v,) in store.con.execute(
                    f'SELECT DISTINCT schema_version FROM "{table.replace(chr(34), chr(34) * 2)}"').fetchall()}
        prov = []
        if store.has_table("provenance"):
            prov = [{**json.loads(rec), "id": pid}
                    for pid, rec in store.con.execute("SELECT id, record FROM provenance ORDER BY id").fetchall()]
        sessions = [_session_row(s) for s in read_sessions(store)]
    finally:
        store.close()
    other = sorted(v for v in versions if v != SCHEMA_VERSION)
    if other:
        raise UserError(f"{path}: records of schema version {other[0]}; this tamperbench reads version {SCHEMA_VERSION}")
    if not any(counts.values()):
        raise UserError(f"{path}: the run is empty (no records yet)")
    return RunInfo(path=path, index=index, suite=spec["suite"], spec=spec, schema_version=SCHEMA_VERSION,
                   provenance=prov, counts=counts, sessions=sessions)


def _session_row(s: dict) -> dict:
    """A stored session as the run page shows it, every field coerced to its shape (a run folder can come from
    anyone: a list where a mapping belongs must not break the page; the template escapes the text)."""
    env, argv = s.get("env"), s.get("argv")
    threads, cpus = s.get("torch_threads"), s.get("cpu_count")
    return {"recorded_at": str(s.get("recorded_at") or ""),
            "torch_threads": threads if isinstance(threads, int) and not isinstance(threads, bool) else "",
            "env": {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {},
            "argv": [str(a) for a in argv] if isinstance(argv, list) else [],
            "tamperbench_commit": str(s.get("tamperbench_commit") or ""),
            "tamperbench_dirty": s.get("tamperbench_dirty") is True,
            "cpu_model": str(s.get("cpu_model") or ""),
            "cpu_count": cpus if isinstance(cpus, int) and not isinstance(cpus, bool) else ""}


def build_site(runs: list[Path], out: Path, title: str = "tamperbench") -> tuple[Path, list[str]]:
    """Build the site; returns (index.html, problems). Raises when no run given is usable."""
    writer = SiteWriter(out)
    try:
        index, problems = _build(writer, runs, title)
    except BaseException:
        writer.abort()
        raise
    writer.commit()
    return writer.final / index.name, problems


def _build(writer: SiteWriter, runs: list[Path], title: str) -> tuple[Path, list[str]]:
    from tamperbench.store.distinct import distinct_paths, distinct_records

    infos = []
    runs, problems = distinct_paths(runs)  # a run given twice (or through a link) is counted once
    for i, path in enumerate(runs):
        try:
            infos.append(read_run(Path(path), i))
        except UserError as err:
            problems.append(str(err))
    counted, copies = distinct_records([info.path for info in infos])  # and so is a copy of a run
    infos, problems = [info for info in infos if info.path in counted], problems + copies
    if not infos:
        raise UserError("report: no usable run among those given" + (f" ({problems[0]})" if problems else ""))
    writer.copy_assets()
    sections: list[Section] = []
    for suite in sorted({r.suite for r in infos}, key=lambda s: (SUITE_ORDER.index(s) if s in SUITE_ORDER else 99, s)):
        group = [r for r in infos if r.suite == suite]
        build = section_builder(suite)
        if build is None:
            problems.extend(f"{r.path}: suite '{suite}' has no report section" for r in group)
            continue
        section = build(group, writer)
        section.runs = group
        sections.append(section)
    for section in sections:
        for table in section.tables:
            table.exports = writer.export_table(table)
    for info in infos:
        writer.render("run.html.j2", info.page, title=f"{title}: {info.label}", run=info,
                      spec_json=json.dumps(info.spec, indent=2, sort_keys=True),
                      provenance_json=[json.dumps(p, indent=2, sort_keys=True) for p in info.provenance])
    index = writer.render("index.html.j2", "index.html", title=title, sections=sections, runs=infos,
                          problems=problems)
    writer.write_text("problems.txt", "\n".join(problems) + ("\n" if problems else ""))
    return index, problems
