"""The roofline part of benchmarks/sleight_throughput.py: decoder steps timed apart at several row counts,
the linear layers alone, and what MFU the engine's batch profile allows (src/tamperbench/sleight/roofline.py).
Kept apart so the benchmark script states its workloads and stays under the 400-line limit.
"""

from __future__ import annotations

import contextlib
import os
import time

import torch

from tamperbench.sleight import roofline


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    k = len(xs)
    return (xs[(k - 1) // 2] + xs[k // 2]) / 2



def step_curve(be, cols: int, rows=(1, 4, 12, 24, 46), steps: int = 4) -> dict[int, list[float]]:
    """Decoder steps timed at fixed row counts and one context length (``cols`` columns), the same
    shape as the engine's ``step_profile``: one prefilled row forked to ``r`` rows, one of them
    rolled back a token so the batch carries a masked hole as the engine's do (padding, rollbacks)."""
    prof: dict[int, list[float]] = {}
    prompt = [1000 + i % 5000 for i in range(max(2, cols - 3))]
    for r in rows:
        dec = be.step_decoder(topk=20, capacity=max(rows))
        [rid] = dec.add_rows([prompt])
        dec.step()
        dec.step()
        if r > 1:
            dec.fork(rid, r - 1)
            dec.rollback(rid, 1)
        dec.step()
        f0, c = dec.forward_seconds, 0
        for _ in range(steps):
            dec.step()
            c += dec.n
        prof[r] = [steps, dec.forward_seconds - f0, c]
    return prof


def linear_floor(be, rows=(2, 4, 12, 24, 46), reps: int = 4) -> dict[int, list[float]]:
    """The model's own linear layers alone, called in forward order through ``nn.Module`` as a step
    calls them, under the engine's packed weights and fused sibling groups (models/decoding/
    packed_linear.py), timed at fixed row counts: what a decoder step costs if attention, norms,
    the sampling statistics and the bookkeeping took no time. Their weights (538 MB for the
    embedded model) are 16x the 32 MB last-level cache, so each pass reads them from memory as a
    step does. Same ``{rows: [passes, seconds, 0]}`` shape as :func:`step_curve`. From 2 rows: the
    decoder runs one-row forwards unpacked (packing is slower there), so a packed 1-row pass would
    not be the engine's cost; a 1-row step then counts at the fit's fixed + per-row cost, which
    underestimates it (the floor stays a floor)."""
    from tamperbench.models.decoding.packed_linear import packed_linears_for

    lins = [m for m in be.model.modules() if isinstance(m, torch.nn.Linear)]
    packer = packed_linears_for(be.model)
    prof: dict[int, list[float]] = {}
    with torch.inference_mode(), (packer.active() if packer is not None else contextlib.nullcontext()):
        for r in rows:
            # one input per width, made before timing: fused siblings see the very same tensor
            xs = {w: torch.randn(r, w) for w in {m.in_features for m in lins}}

            def one_pass(xs: dict[int, torch.Tensor] = xs) -> None:
                for m in lins:
                    m(xs[m.in_features])

            one_pass()
            t = time.perf_counter()
            for _ in range(reps):
                one_pass()
            prof[r] = [reps, time.perf_counter() - t, 0]
    return prof


def report_linear_floor(be, prof: dict, fit, tokens: int, fpt: float, peak: float, target: float = 0.7) -> None:
    """The MFU this run's step profile would reach if only the linear layers took time, and the
    time a step leaves everything else at ``target`` (against what the measured forward spends on it)."""
    floor = roofline.fit_step_cost(linear_floor(be), columns=False)
    if floor is None:
        return
    steps = sum(int(v[0]) for v in prof.values())
    rows = sum(int(v[0]) * r for r, v in prof.items())
    t_floor = steps * floor.fixed + rows * floor.per_row
    t_target = tokens * fpt / (target * peak)
    print(f"linear layers alone ({sum(isinstance(m, torch.nn.Linear) for m in be.model.modules())} linears chained, "
          f"packed as the engine runs them, timed apart at 2-46 rows; load {os.getloadavg()[0]:.1f}): "
          f"{floor.fixed * 1e3:.1f} ms + {floor.per_row * 1e3:.2f} ms/row, i.e. {roofline.weight_bytes(be.model) / max(floor.fixed, 1e-9) / 1e9:.1f} GB/s "
          f"of weights and {fpt / max(floor.per_row, 1e-12) / 1e9:.0f} GFLOP/s a row")
    print(f"linear floor: over this run's {steps} steps and {rows} token-rows the linears alone take {t_floor:.2f} s "
          f"-> MFU at most {roofline.mfu(tokens, t_floor, fpt, peak):.2f} if attention, norms, statistics and "
          f"bookkeeping took no time; MFU {target} needs the whole run in {t_target:.2f} s, leaving "
          f"{(t_target - t_floor) / max(steps, 1) * 1e3:.1f} ms a step for all of them"
          + ("" if fit is None else
             f" (the measured forward spends {(fit.fixed - floor.fixed) * 1e3:.1f} ms + "
             f"{(fit.per_row - floor.per_row) * 1e3:.2f} ms/row on them, "
             f"{(fit.fixed - floor.fixed + (fit.per_row - floor.per_row) * rows / max(steps, 1)) * 1e3:.1f} ms "
             f"at this run's mean {rows / max(steps, 1):.1f} rows)"))


def report_roofline(be, stats: dict, seconds: float, cpu_seconds: float, tokens: int, fpt: float, peak: float,
                    bws: list[float], target: float = 0.7) -> None:
    """What MFU this run's batch profile allows at all (sleight/roofline.py), and how near the engine gets."""
    prof = stats["step_profile"]
    cfg = be.model.config
    wb = roofline.weight_bytes(be.model)
    kvc = roofline.kv_bytes_per_column(cfg, next(be.model.parameters()).element_size())
    bw = _median(bws)
    rl = roofline.bound(prof, flop_per_token=fpt, weight_bytes=wb, kv_bytes_per_column=kvc,
                        attention_flop_per_column=roofline.attention_flop_per_column(cfg), peak=peak, bandwidth=bw)
    a_over, a_sum = rl.attainable(tokens, fpt, peak)
    rows = sorted(r for r, v in prof.items() for _ in range(int(v[0])))
    few = sum(int(v[0]) for r, v in prof.items() if r <= 4)
    cols = sum(v[2] for v in prof.values()) / max(1, rl.steps)
    print(f"roofline: one thread reads {bw / 1e9:.1f} GB/s (torch.sum over 512 MiB, median of {len(bws)} samples spread "
          f"over the rounds); a step reads {wb / 1e6:.0f} MB of weights (tied embedding once) + rows x {cols:.0f} "
          f"context columns (mean) x {kvc / 1e3:.0f} kB of KV per column")
    print(f"roofline: {rl.steps} steps, {rl.rows} token-rows; rows per step min {rows[0]}, median {_median(rows):.0f}, "
          f"mean {rl.rows / rl.steps:.1f}, max {rows[-1]}; {few} steps with <= 4 rows; ridge (compute = weight "
          f"read) at {wb / bw / (fpt / peak):.1f} rows")
    print(f"roofline: bound with compute and memory overlapped (per step max(flop/peak, bytes/bw)) {rl.seconds_overlap:.1f} s "
          f"-> attainable MFU {a_over:.2f}; without overlap (flop/peak + bytes/bw) {rl.seconds_no_overlap:.1f} s "
          f"-> attainable MFU {a_sum:.2f}")
    for label, t in (("wall", seconds), ("CPU", cpu_seconds)):
        got = roofline.mfu(tokens, t, fpt, peak)
        print(f"roofline: engine {t:.1f} s {label} time -> MFU {got:.2f} = {got / a_over:.0%} of the overlapped "
              f"bound, {got / a_sum:.0%} of the no-overlap bound")
    r_over, r_sum = roofline.rows_needed(target, flop_per_token=fpt, step_bytes=wb, peak=peak, bandwidth=bw)
    print(f"roofline: MFU {target} needs >= {r_over:.1f} rows in every step (overlapped) or >= {r_sum:.1f} "
          f"(no overlap) at {bw / 1e9:.1f} GB/s; this run averaged {rl.rows / rl.steps:.1f}")
    c0 = time.process_time()
    curve = step_curve(be, round(cols))
    fit = roofline.fit_step_cost(curve, columns=False)
    print(f"step cost at {round(cols)} context columns (the run's mean), timed apart ({time.process_time() - c0:.0f} "
          f"CPU s; load {os.getloadavg()[0]:.1f}): "
          + ", ".join(f"{r} rows {v[1] / v[0] * 1e3:.0f} ms" for r, v in curve.items()))
    if fit is not None:
        need = fit.rows_for(target, fpt, peak)
        print(f"step cost fit (least squares): forward = {fit.fixed * 1e3:.1f} ms + {fit.per_row * 1e3:.2f} ms/row, "
              f"i.e. a step's fixed cost is {wb / max(fit.fixed, 1e-9) / 1e9:.1f} GB/s of weight traffic "
              f"(one thread reads {bw / 1e9:.1f}) and each row runs at {fpt / max(fit.per_row, 1e-12) / 1e9:.0f} "
              f"GFLOP/s (peak {peak / 1e9:.0f}); an unbounded batch tends to MFU {fit.limit_mfu(fpt, peak):.2f}; "
              f"MFU {target} would need "
              + (f"{need:.0f} rows in every step" if need != float("inf") else "more than any batch at this cost"))
    report_linear_floor(be, prof, fit, tokens, fpt, peak, target)
