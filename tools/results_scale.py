"""Scale evidence for ``docs/results.md``: time, tokens per second, memory and kill/resume counts per run.

From the run directories (copies taken at page time): each stored record's ``created_at`` (UTC, whole
seconds). A *session* is a stretch of records with no gap over ``SESSION_GAP_S`` (a kill and a resume start a
new one); its span runs from its first to its last stored record, so it leaves out the model load and the
first batch before anything is stored. Tokens are the ones decoded: Sleight of Word's clean answers plus
each trial's tokens after its first swap (an untouched trial decodes nothing of its own), Exact Words'
new tokens; OWMI's choice read-out decodes no answer, so its rate is records per second.

From the process logs in ``--logs`` (optional, named after the run directory): ``RUN.time`` or ``RUN.err``
(the output of ``/usr/bin/time -v``: wall, CPU, peak resident memory of the last process),
``RUN.rss`` (one ``VmHWM``/``VmRSS`` sample a minute) and ``RUN.kills.txt`` (a record of SIGKILLs and
resumes, shown as written).
"""

from __future__ import annotations

import bisect
import datetime as dt
import re
from pathlib import Path

SESSION_GAP_S = 1800  # a write every few minutes while a run lives, even on a loaded machine
FLAT_WITHIN = 0.05  # memory is "flat" when the last sample is within 5% of the one after the model loaded
WARM_S = 600  # a process's memory is called flat only over at least this long after its peak
NEW_PROCESS_GAP_S = 150  # samples come once a minute: a longer silence, or a lower VmHWM, starts another process
TABLES = {  # table -> SQL for (created_at, decoded tokens) per record
    "sleight_clean": "SELECT created_at, len(token_ids) FROM sleight_clean",
    "sleight_trials": "SELECT created_at, n_tokens - fork_at FROM sleight_trials",
    "quote_trials": "SELECT created_at, n_new_tokens FROM quote_trials",
    "owmi_runs": "SELECT created_at, NULL FROM owmi_runs",
}
TIME_FIELDS = {"Elapsed (wall clock) time (h:mm:ss or m:ss)": "wall", "User time (seconds)": "user_s",
               "System time (seconds)": "sys_s", "Maximum resident set size (kbytes)": "max_rss_kb",
               "Exit status": "exit_status", "Command being timed": "command"}
RSS = re.compile(r"^(\S+)\s+VmHWM:\s+(\d+)\s+VmRSS:\s+(\d+)")


def _ts(s: str) -> float:
    return dt.datetime.fromisoformat(s).timestamp()


def _points(store) -> list[tuple[float, int | None]]:
    """(created_at, decoded tokens) of every stored record, oldest first."""
    points: list[tuple[float, int | None]] = []
    for table, sql in TABLES.items():
        if store.has_table(table):
            points += [(_ts(c), t) for c, t in store.con.execute(sql).fetchall()]
    return sorted(points)


def _when(value) -> float | None:
    try:
        return _ts(value) if isinstance(value, str) else None
    except ValueError:  # a hand-edited row: it names no time
        return None


def stored_by(sessions: list[dict], points: list[tuple[float, int | None]]) -> tuple[dict[str, int], int]:
    """Per recorded process (a ``session`` id: one row per model it opened the run for), the records stored
    from when it first opened the run to when the next process did; and the records stored before the first
    one (written before runs recorded their sessions). One process writes a run at a time (its lock), so the
    stretches do not overlap; a process that resumed a finished run stored none."""
    first: dict[str, float] = {}
    for s in sessions:
        t, sid = _when(s.get("recorded_at")), str(s.get("session"))
        if t is not None and (sid not in first or t < first[sid]):
            first[sid] = t
    starts = sorted((t, sid) for sid, t in first.items())
    times = [t for t, _ in starts]
    counts = {sid: 0 for sid in first}
    before = 0
    for t, _ in points:
        i = bisect.bisect_right(times, t) - 1  # the last process to open the run at or before t
        if i < 0:
            before += 1
        else:
            counts[starts[i][1]] += 1
    return counts, before


def record_sessions(points: list[tuple[float, int | None]], since: float | None = None) -> dict | None:
    """Records, decoded tokens and sessions of one run, from its stored records' ``points`` (``_points``); with
    ``since`` (when the last process started) also the tokens that process stored and its rate from its start."""
    if not points:
        return None
    sessions = [[points[0]]]
    for p in points[1:]:
        if p[0] - sessions[-1][-1][0] > SESSION_GAP_S:
            sessions.append([])
        sessions[-1].append(p)
    span = sum(s[-1][0] - s[0][0] for s in sessions)
    tokens = None if all(t is None for _, t in points) else sum(t or 0 for _, t in points)
    iso = lambda x: dt.datetime.fromtimestamp(x, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")  # noqa: E731
    mine = [p for p in points if since is not None and p[0] >= since]
    own = None
    if mine and tokens is not None and mine[-1][0] > since:
        n = sum(t or 0 for _, t in mine)
        own = {"records": len(mine), "tokens": n, "span_s": mine[-1][0] - since, "tokens_per_s": n / (mine[-1][0] - since)}
    return {"records": len(points), "tokens": tokens, "sessions": len(sessions), "span_s": span, "last_process": own,
            "first": iso(points[0][0]), "last": iso(points[-1][0]),
            "tokens_per_s": None if tokens is None or span <= 0 else tokens / span,
            "records_per_s": None if span <= 0 else len(points) / span}


def _seconds(wall: str) -> float:
    parts = [float(x) for x in wall.split(":")]
    return sum(p * 60 ** i for i, p in enumerate(reversed(parts)))


def time_log(path: Path) -> dict | None:
    """The last ``/usr/bin/time -v`` block in ``path``: wall and CPU seconds, peak resident memory."""
    if not path.is_file():
        return None
    found: dict = {}
    for line in path.read_text(errors="replace").splitlines():
        key, _, value = line.strip().partition(": ")
        if key == "Command being timed":
            found = {}
        if key in TIME_FIELDS:
            found[TIME_FIELDS[key]] = value.strip().strip('"')
    if "wall" not in found:
        return None
    return {"file": path.name, "command": found.get("command"), "wall_s": _seconds(found["wall"]),
            "cpu_s": float(found.get("user_s", 0)) + float(found.get("sys_s", 0)),
            "max_rss_mb": int(found.get("max_rss_kb", 0)) / 1024, "exit_status": found.get("exit_status")}


def rss_log(path: Path) -> dict | None:
    """The memory samples of ``path``: the first sample after the model loaded (the first whose peak is over
    twice the very first sample's), the last one, and every sample for the figure."""
    if not path.is_file():
        return None
    samples = [(m.group(1), int(m.group(2)) / 1024, int(m.group(3)) / 1024)
               for m in map(RSS.match, path.read_text(errors="replace").splitlines()) if m]
    if not samples:
        return None
    loaded = _loaded(samples) or samples[0]
    share = (samples[-1][2] - loaded[2]) / loaded[2] if loaded[2] else 0.0
    return {"file": path.name, "n": len(samples), "first": samples[0], "loaded": loaded, "last": samples[-1],
            "peak_hwm_mb": max(s[1] for s in samples), "growth_rss_mb": samples[-1][2] - loaded[2],
            "growth_rss_share": share, "flat": abs(share) <= FLAT_WITHIN, "flat_within": FLAT_WITHIN,
            "processes": processes(samples), "warm_minutes": WARM_S // 60, "samples": samples}


def _loaded(samples: list[tuple]) -> tuple | None:
    """The first sample after the model loaded: the first whose peak is over twice the very first sample's."""
    return next((s for s in samples if s[1] > 2 * samples[0][1]), None)


def processes(samples: list[tuple]) -> list[dict]:
    """The samples cut into processes (a kill and a resume start a new one: VmHWM never falls within one, and
    samples stop while none runs), each with its memory after the model loaded, when its peak (VmHWM) last
    rose, and at its last sample. WHY per process and from the peak: over a run resumed several times the
    first and last samples belong to different processes, and within one the resident set rises in steps
    while the decoder meets its largest batches (each step raises VmHWM). A leak keeps raising the peak to the
    end; a process whose peak stopped rising long before its end, with its resident memory flat since, holds
    no leak over the trials it ran in that time."""
    cut: list[list[tuple]] = []
    for s in samples:
        prev = cut[-1][-1] if cut else None
        if prev is None or s[1] < prev[1] or _ts(s[0]) - _ts(prev[0]) > NEW_PROCESS_GAP_S:
            cut.append([s])
        else:
            cut[-1].append(s)
    out = []
    for run in cut:
        loaded = _loaded(run)
        if loaded is None:
            continue  # killed before its model loaded
        top = max(x[1] for x in run)
        peak = next(s for s in run if s[1] == top)
        after_s = _ts(run[-1][0]) - _ts(peak[0])
        out.append({"start": run[0][0], "loaded": loaded, "peak": peak, "last": run[-1],
                    "loaded_min": round((_ts(run[-1][0]) - _ts(loaded[0])) / 60),
                    "after_peak_min": round(after_s / 60), "after_peak_growth_mb": run[-1][2] - peak[2],
                    "after_peak_share": (run[-1][2] - peak[2]) / peak[2] if peak[2] else 0.0,
                    "plateau": after_s >= WARM_S, "long": _ts(run[-1][0]) - _ts(loaded[0]) >= 2 * WARM_S})
    return out


def settings(session: dict) -> dict:
    """What the page shows of one stored session (``tamperbench.runs.session``): when, on how many torch threads,
    under which thread variable, from which commit."""
    commit = session.get("tamperbench_commit")
    return {"recorded_at": session.get("recorded_at"), "torch_threads": session.get("torch_threads"),
            "omp": (session.get("env") or {}).get("OMP_NUM_THREADS"),
            "commit": (commit[:12] + ("+dirty" if session.get("tamperbench_dirty") else "")) if commit else None}


def evidence(run: str, copy: Path | None, logs: Path | None) -> dict:
    """Everything the page's scale table shows for one run."""
    from tamperbench.store import RunStore
    from tamperbench.store.sessions import read_sessions

    out: dict = {"run": run, "records": None, "time": None, "rss": None, "kills": None, "session_gap_s": SESSION_GAP_S,
                 "settings": [], "processes": None}
    if logs is not None:
        name = Path(run).name if not Path(run).name.startswith("run-") else Path(run).parent.name  # a check's run
        out["time"] = time_log(logs / f"{name}.time") or time_log(logs / f"{name}.err")
        out["rss"] = rss_log(logs / f"{name}.rss")
        kills = logs / f"{name}.kills.txt"
        out["kills"] = kills.read_text().strip().splitlines() if kills.is_file() else None
    since = _ts(out["rss"]["first"][0].replace("Z", "+00:00")) if out["rss"] else None  # the last process's start
    if copy is not None and (copy / "records.duckdb").is_file():
        with RunStore.open_existing(copy, read_only=True) as store:
            points = _points(store)
            out["records"] = record_sessions(points, since)
            sessions = read_sessions(store)
            counts, out["stored_before_sessions"] = stored_by(sessions, points)
            out["settings"] = [{**settings(s), "process": str(s.get("session")),
                                "stored": counts.get(str(s.get("session")), 0)} for s in sessions]
            out["processes"] = {"recorded": len({s["process"] for s in out["settings"]}),
                                "storing": sum(1 for n in counts.values() if n), "stored": sum(counts.values()),
                                "before": out["stored_before_sessions"]}
    r, t = out["records"] or {}, out["time"] or {}
    if r.get("last_process"):
        out["rate"] = {"tokens_per_s": r["last_process"]["tokens_per_s"], "basis": "last process, from its start "
                       "(first memory sample) to its last stored record"}
    elif t.get("wall_s") and r.get("tokens") is not None and r.get("sessions") == 1:
        out["rate"] = {"tokens_per_s": r["tokens"] / t["wall_s"], "basis": "the process's wall time (time -v)"}
    elif r.get("tokens_per_s") is not None:
        out["rate"] = {"tokens_per_s": r["tokens_per_s"], "basis": "stored-record sessions"}
    else:
        out["rate"] = None
    return out
