"""A roofline for OWMI: FLOPs, time, MFU and the no-overlap bound per phase, old engine against new.

Why: Sleight of Word's engine prints how far it is from the machine's limit (sleight_throughput.py);
OWMI's had no such accounting. This runs ``owmi run`` (owmi.run.runner.run, the whole run) on the quick
preset under ``choice`` and on the known-positive check's spec, with the engine of an earlier commit
(``--old``, imported beside this one by ``_owmi_old.py``) and this one alternated in one process, so
load from other processes falls on both: the speed-up is the median same-process ratio.

Accounting. Forward pre-hooks on every decoder layer and on the output head count each forward's work
where it is spent (a forward whose layers below the hook run on one row per group, ``owmi/engine/bottom.py``,
is charged what it computes): FLOP = rows x columns x 2 x (the layer's parameters) + rows x columns x
(context columns attended) x attention FLOP per column, per layer, + rows x kept logits x 2 x hidden x
vocabulary at the head; bytes = every layer's and the head's weights once per forward + rows x context
columns x KV bytes per column (``sleight/roofline.py``'s model); a forward is one call of the head. Phases (the
innermost running one is charged, wall time exclusive of nested phases):

* ``task``: the baseline answer, the treatment's and the controls' teacher-forced effects (JS, causal);
* ``calibration``: impact matching (Eq. 7's bisection);
* ``probes``: the probe contexts under every condition (and the task answers of delayed tracks);
* ``choice scoring``: the option tries after the forced prefix (inside probes and observer);
* ``observer``: the text-only observer's contexts;
* ``other``: model load, records, the rest.

MFU = FLOP / seconds / peak (a float32 1024^3 matmul's FLOP/s, sampled in the same process);
the no-overlap roofline = sum over forwards of FLOP / peak + bytes / bandwidth (one thread's read
bandwidth, sampled likewise): the time this very sequence of forwards needs at least; the engine's
fraction of it = roofline seconds / measured seconds.

Usage:
  .venv/bin/python benchmarks/owmi_throughput.py                         # quick preset + check, old vs new
  .venv/bin/python benchmarks/owmi_throughput.py --items 1 --operators 1 --seeds 1 --skip-check
  options: --old COMMIT (default 6d4615e), --skip-old, --skip-quick, --repeats N, --kp-adapter DIR (the adapted model of
  ``owmi known-positive --preset demo --out X``: X/adapter; without it the check's base-model half runs)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

PHASES = ("task", "calibration", "probes", "choice scoring", "observer", "other")


class Ledger:
    """FLOP, bytes, forwards and exclusive wall seconds per phase for one model."""

    def __init__(self, peak: float, bandwidth: float):
        self.peak, self.bw = peak, bandwidth
        self.stack = ["other"]
        self.t = time.perf_counter()
        self.s: dict[str, dict] = defaultdict(lambda: dict(flop=0.0, bytes=0.0, forwards=0, seconds=0.0, bound=0.0))

    def _charge(self) -> None:
        now = time.perf_counter()
        self.s[self.stack[-1]]["seconds"] += now - self.t
        self.t = now

    def push(self, phase: str) -> None:
        self._charge()
        self.stack.append(phase)

    def pop(self) -> None:
        self._charge()
        self.stack.pop()

    def watch(self, model) -> None:
        """Count every decoder layer's and the output head's work where it runs: a forward whose layers
        below the hook run on fewer rows (``owmi/engine/bottom.py``) is charged what it computes."""
        from tamperbench.sleight import roofline

        model = model.get_base_model() if hasattr(model, "get_base_model") else model  # a PEFT wrapper's model
        cfg = model.config
        layers = model.model.layers
        n = len(layers)
        att = roofline.attention_flop_per_column(cfg) / n
        kvc = roofline.kv_bytes_per_column(cfg) / n
        head = 2 * int(cfg.hidden_size) * int(cfg.vocab_size)
        head_bytes = model.lm_head.weight.numel() * model.lm_head.weight.element_size()

        def charge(flop: float, nbytes: float, forward: bool = False) -> None:
            s = self.s[self.stack[-1]]
            s["flop"] += flop
            s["bytes"] += nbytes
            s["forwards"] += int(forward)
            s["bound"] += flop / self.peak + nbytes / self.bw

        def layer_hook(idx: int, body: int, wbytes: int):
            def pre(_mod, args, kwargs):
                h = args[0] if args else kwargs["hidden_states"]
                b, w = h.shape[0], h.shape[1]
                cache = kwargs.get("cache", kwargs.get("past_key_values"))
                past = cache.get_seq_length(idx) if cache is not None and len(getattr(cache, "layers", [])) > idx else 0
                charge(b * w * 2 * body + b * w * (past + (w + 1) / 2) * att, wbytes + b * (past + w) * kvc)
            return pre

        for i, layer in enumerate(layers):
            body = sum(p.numel() for p in layer.parameters())
            layer.register_forward_pre_hook(layer_hook(i, body, body * 4), with_kwargs=True)
        model.lm_head.register_forward_pre_hook(
            lambda _m, args: charge(args[0].shape[0] * args[0].shape[1] * head, head_bytes, forward=True))

    def table(self) -> dict:
        self._charge()
        out = {}
        for ph in PHASES:
            s = self.s.get(ph)
            if not s:
                continue
            sec = s["seconds"]
            out[ph] = dict(seconds=round(sec, 2), gflop=round(s["flop"] / 1e9, 1), forwards=s["forwards"],
                           mfu=round(s["flop"] / sec / self.peak, 3) if sec else None,
                           roofline_s=round(s["bound"], 2), of_roofline=round(s["bound"] / sec, 3) if sec else None)
        tot = {k: sum(v[k] for v in self.s.values()) for k in ("flop", "bytes", "forwards", "seconds", "bound")}
        out["total"] = dict(seconds=round(tot["seconds"], 2), gflop=round(tot["flop"] / 1e9, 1), forwards=tot["forwards"],
                            mfu=round(tot["flop"] / tot["seconds"] / self.peak, 3),
                            roofline_s=round(tot["bound"], 2), of_roofline=round(tot["bound"] / tot["seconds"], 3))
        return out


def _wrap(cls, name: str, phase, ledger_of) -> None:
    fn = getattr(cls, name)

    def wrapped(self, *a, **kw):
        led = ledger_of()
        ph = phase(self) if callable(phase) else phase
        if led is None or ph is None:
            return fn(self, *a, **kw)
        led.push(ph)
        try:
            return fn(self, *a, **kw)
        finally:
            led.pop()

    setattr(cls, name, wrapped)


def module(pkg: str, *paths: str):
    """The first of ``paths`` (module paths under ``pkg.owmi``, newest layout first) that imports."""
    import importlib

    for path in paths:
        try:
            return importlib.import_module(f"{pkg}.owmi.{path}")
        except ModuleNotFoundError:
            continue
    raise ModuleNotFoundError(f"{pkg}.owmi: none of {paths}")


def instrument(pkg: str, holder: dict) -> None:
    """Charge the engine methods of package ``pkg`` (``tamperbench`` or the old copy) to their phases:
    the engine classes of the layout by phase (``engine/base.py``, ``batched.py``, ``reference.py``, the
    read-out's ``Readout``) or the one mixed-in ``Engine`` of the flat layout before it."""
    try:
        classes = [module(pkg, "engine.base").Engine, module(pkg, "engine.batched").BatchedEngine,
                   module(pkg, "engine.reference").ReferenceEngine]
        readers = [module(pkg, "engine.readout").Readout]
    except (ModuleNotFoundError, AttributeError):
        classes = readers = [module(pkg, "engine").Engine]
    led = lambda: holder.get("ledger")  # noqa: E731
    for cls in classes:
        for name, ph in (("prepare", "task"), ("effects_rows", "task"), ("effect", "task"),
                         ("calibrate", "calibration"), ("probe_rows", "probes"), ("probe_delayed_rows", "probes"),
                         ("task_rows", "probes"), ("probe_fresh", "probes"), ("probe_delayed", "probes"),
                         ("probe_visible", "probes"), ("observe_rows", "observer"), ("observe", "observer")):
            if name in vars(cls) or (cls is classes[0] and hasattr(cls, name)):
                _wrap(cls, name, ph, led)
    for cls in readers:
        for name in ("answer_rows", "answer_plain"):
            _wrap(cls, name, lambda self: "choice scoring" if self.spec.readout == "choice" else None, led)


def peak_flops(n: int = 1024, reps: int = 3) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best


def one_run(pkg: str, spec, holder: dict, peak: float, bw: float) -> dict:
    import importlib

    from rich.console import Console

    run = module(pkg, "run.runner", "runner").run
    models = importlib.import_module(f"{pkg}.models")
    led = Ledger(peak, bw)
    real = models.load_backend

    def load(*a, **kw):
        be = real(*a, **kw)
        led.watch(be.model)
        return be

    holder["ledger"] = led
    models.load_backend = load
    try:
        with tempfile.TemporaryDirectory() as tmp:
            t, c = time.perf_counter(), time.process_time()
            rep = run(spec, Path(tmp) / "run", console=Console(file=open("/dev/null", "w")))
            sec, cpu = time.perf_counter() - t, time.process_time() - c
            import duckdb

            con = duckdb.connect(str(Path(tmp) / "run" / "records.duckdb"), read_only=True) \
                if (Path(tmp) / "run" / "records.duckdb").exists() else None
            rows = con.execute('SELECT key, choice_logprobs, js_mean FROM owmi_runs').fetchall() if con else []
    finally:
        models.load_backend = real
        holder["ledger"] = None
    return {"seconds": sec, "cpu_seconds": cpu, "records": rep.written, "phases": led.table(), "rows": {k: (c, j) for k, c, j in rows}}


def agree(a: dict, b: dict, tol: float = 2e-3) -> dict:
    """Same keys; choice log-probabilities and JS within ``tol`` (absolute)."""
    if set(a) != set(b):
        return {"same_keys": False}
    worst = 0.0
    for k, (ca, ja) in a.items():
        cb, jb = b[k]
        if ca and cb:
            x, y = json.loads(ca), json.loads(cb)
            worst = max(worst, max(abs(x[o] - y[o]) for o in x))
        if ja is not None and jb is not None:
            worst = max(worst, abs(ja - jb))
    return {"same_keys": True, "records": len(a), "max_abs_diff": worst, "within": worst <= tol, "tolerance": tol}


def specs(pkg: str, a) -> dict:

    spec_mod = module(pkg, "run.spec", "spec")
    full = spec_mod.quick_spec()
    over: dict = {"readout": "choice"}
    if a.items:
        over["items_per_benchmark"] = a.items
    if a.operators:
        over["operators"] = [o.model_dump(mode="json") for o in full.operators[: a.operators]]
    if a.seeds:
        over["seeds"] = list(full.seeds[: a.seeds])
    out = {} if a.skip_quick else {"quick": spec_mod.quick_spec(**over)}
    if not a.skip_check:
        pc = module(pkg, "controls.positive_check", "analysis.positive_check")
        try:  # nine anchor items, one seed: nine held-out directions
            kp = pc.check_spec(Path(a.kp_adapter or "/nonexistent"), "embedded", a.kp_layer, "choice",
                               directions=(900000, 900008), seeds=(0,), probe_tokens=24)
        except TypeError:  # an engine from before held-out directions
            kp = pc.check_spec(Path(a.kp_adapter or "/nonexistent"), "embedded", a.kp_layer, "choice", items=9,
                               seeds=(0,), probe_tokens=24)
        if not a.kp_adapter:  # the check's base-model half: the same engine work, one model
            kp = spec_mod.OwmiSpec.model_validate({**kp.model_dump(mode="json"), "models": ["embedded"]})
        out["known-positive check"] = kp
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", default="6d4615e", help="the commit whose engine is the baseline")
    ap.add_argument("--skip-old", action="store_true")
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--skip-quick", action="store_true", help="the known-positive check's spec alone")
    ap.add_argument("--items", type=int, default=None)
    ap.add_argument("--operators", type=int, default=None)
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--kp-adapter", default=None)
    ap.add_argument("--kp-layer", type=int, default=15)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    from tamperbench.sleight import roofline

    holder: dict = {}
    pkgs = ["tamperbench"]
    instrument("tamperbench", holder)
    if not a.skip_old:
        from _owmi_old import load_old

        pkgs.append(load_old(a.old).__name__)
        instrument(pkgs[-1], holder)
    peak, bw = peak_flops(), roofline.measure_bandwidth()
    result: dict = {"peak_gflops": round(peak / 1e9, 1), "bandwidth_gbs": round(bw / 1e9, 1), "old": a.old,
                    "date": time.strftime("%Y-%m-%d"), "workloads": {}}
    sp = {p: specs(p, a) for p in pkgs}
    for wl in sp["tamperbench"]:
        runs: dict = {p: [] for p in pkgs}
        for k in range(a.repeats):
            for p in (pkgs if k % 2 == 0 else pkgs[::-1]):
                runs[p].append(one_run(p, sp[p][wl], holder, peak, bw))
                print(f"# {wl} {p}: {runs[p][-1]['seconds']:.1f} s ({runs[p][-1]['cpu_seconds']:.1f} s CPU), "
                      f"{runs[p][-1]['records']} records; "
                      f"{json.dumps(runs[p][-1]['phases'])}", file=sys.stderr, flush=True)
        entry = {"records": runs["tamperbench"][0]["records"],
                 "new": {"seconds": [round(r["seconds"], 1) for r in runs["tamperbench"]],
                         "cpu_seconds": [round(r["cpu_seconds"], 1) for r in runs["tamperbench"]],
                         "phases": runs["tamperbench"][-1]["phases"]}}
        if len(pkgs) > 1:
            old = runs[pkgs[1]]
            entry["old"] = {"seconds": [round(r["seconds"], 1) for r in old],
                            "cpu_seconds": [round(r["cpu_seconds"], 1) for r in old], "phases": old[-1]["phases"]}
            entry["speedup"] = round(statistics.median(o["seconds"] / n["seconds"]
                                                       for o, n in zip(old, runs["tamperbench"])), 2)
            entry["speedup_cpu"] = round(statistics.median(o["cpu_seconds"] / n["cpu_seconds"]
                                                           for o, n in zip(old, runs["tamperbench"])), 2)
            entry["records_agree"] = agree(old[-1]["rows"], runs["tamperbench"][-1]["rows"])
        result["workloads"][wl] = entry
    if a.json:
        print(json.dumps(result))
        return result
    print(f"peak {result['peak_gflops']} GFLOP/s (float32 1024^3 matmul), read bandwidth {result['bandwidth_gbs']} GB/s")
    for wl, e in result["workloads"].items():
        print(f"\n== {wl}: {e['records']} records; new {e['new']['seconds']} s ({e['new']['cpu_seconds']} s CPU)"
              + (f"; old ({a.old}) {e['old']['seconds']} s ({e['old']['cpu_seconds']} s CPU); speed-up x{e['speedup']} "
                 f"wall, x{e['speedup_cpu']} CPU; records {e['records_agree']}"
                 if "old" in e else ""))
        for who in ("new", "old"):
            if who not in e:
                continue
            print(f"  {who}: phase            seconds   GFLOP  forwards   MFU   roofline_s  of_roofline")
            for ph, r in e[who]["phases"].items():
                print(f"  {who}: {ph:16s} {r['seconds']:8.1f} {r['gflop']:7.1f} {r['forwards']:9d} {r['mfu'] or 0:6.3f} "
                      f"{r['roofline_s']:10.2f} {r['of_roofline'] or 0:10.3f}")
    return result


if __name__ == "__main__":
    main()
