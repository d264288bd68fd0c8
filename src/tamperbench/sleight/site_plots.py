"""The Sleight of Word figures readers of the paper look at, drawn from stored records.

- Delta surprisal and Delta entropy per model, with their bootstrap intervals;
- mean surprisal and entropy aligned at each swap (offsets -4 to +8, 95% bands), with the window rule
  of the tables: after the swap the next 8 tokens that were not injected, injected ones skipped;
- flagged and derailed rates for the entity phrase against the neutral substituted words.
"""

from __future__ import annotations

from typing import Any

import numpy as np

BEFORE, AFTER = 4, 8
SIGNALS = {"surprisal": "surprisal (nats)", "entropy_top20": "top-20 entropy (nats)"}


def aligned_offsets(values, injected, swap_pos: int, before: int = BEFORE, after: int = AFTER) -> dict[int, float]:
    """Values by offset around one swap: 0 is the first injected token, +k the k-th later token that
    was not injected (the reference rule's walk), -k the k-th earlier token that was not injected."""
    out = {0: float(values[swap_pos])}
    i, k = swap_pos + 1, 0
    while k < after and i < len(values):
        if not injected[i]:
            k += 1
            out[k] = float(values[i])
        i += 1
    i, k = swap_pos - 1, 0
    while k < before and i >= 0:
        if not injected[i]:
            k += 1
            out[-k] = float(values[i])
        i -= 1
    return out


def swap_profile(traces: list[tuple[Any, list[int]]], signal: str) -> dict:
    """Mean and 95% normal band per offset over every swap of every trial given as (trace, swap positions)."""
    by_off: dict[int, list[float]] = {o: [] for o in range(-BEFORE, AFTER + 1)}
    for trace, positions in traces:
        vals, inj = getattr(trace, signal), trace.injected
        for p in positions:
            for off, v in aligned_offsets(vals, inj, p).items():
                if np.isfinite(v):
                    by_off[off].append(v)
    offs = sorted(by_off)
    mean = [float(np.mean(by_off[o])) if by_off[o] else None for o in offs]
    half = [float(1.96 * np.std(by_off[o], ddof=1) / np.sqrt(len(by_off[o]))) if len(by_off[o]) > 1 else None
            for o in offs]
    return {"offsets": offs, "mean": mean, "half": half, "n": [len(by_off[o]) for o in offs]}


def plot_deltas(summaries: list[dict]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 0.5 + 0.45 * max(3, len(summaries))), squeeze=False)
    for ax, (key, label) in zip(axes[0], (("delta_surprisal", "Δ surprisal (nats)"),
                                          ("delta_entropy_top20", "Δ top-20 entropy (nats)"))):
        names, means, lo, hi = [], [], [], []
        for m in summaries:
            est = m.get(key) or {}
            if est.get("mean") is None:
                continue
            names.append(m["model"])
            means.append(est["mean"])
            lo.append(est["mean"] - (est["lo"] if est.get("lo") is not None else est["mean"]))
            hi.append((est["hi"] if est.get("hi") is not None else est["mean"]) - est["mean"])
        y = np.arange(len(names))
        ax.errorbar(means, y, xerr=[lo, hi], fmt="o", capsize=3)
        ax.axvline(0, color="#888", lw=0.8)
        ax.set_yticks(y, names)
        ax.set_xlabel(label)
    axes[0][0].set_title("post-swap rise, 95% bootstrap CI over questions", loc="left", fontsize=10)
    return fig


def plot_profiles(profiles: dict[str, dict], clean_means: dict[str, float | None]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(profiles), figsize=(5 * len(profiles), 3.4), squeeze=False)
    for ax, (signal, prof) in zip(axes[0], profiles.items()):
        x = np.array(prof["offsets"])
        m = np.array([np.nan if v is None else v for v in prof["mean"]])
        h = np.array([np.nan if v is None else v for v in prof["half"]])
        ax.plot(x, m, marker="o", label="tampered reply")
        ax.fill_between(x, m - h, m + h, alpha=0.25)
        if clean_means.get(signal) is not None:
            ax.axhline(clean_means[signal], color="#888", ls="--", lw=1, label="clean answer mean")
        ax.axvline(0, color="#c00", lw=0.8)
        ax.set_xlabel("offset from the swap (0 = injected; injected skipped)", fontsize=8)
        ax.set_ylabel(SIGNALS[signal])
        ax.legend(fontsize=8)
    return fig


def plot_entity_vs_words(summaries: list[dict]):
    """Grouped bars per model, each labelled with its n; a rate of 0 is a visible zero bar on a 0-based axis
    (not an empty axis around 0), and a model not judged yet says so instead of drawing nothing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(summaries) + 2), 3.4))
    width = 0.2
    x = np.arange(len(summaries))
    top = 0.0
    for k, (key, label) in enumerate((("flagged_entity", "flagged, entity"), ("flagged_words", "flagged, words"),
                                      ("derailed_entity", "derailed, entity"), ("derailed_words", "derailed, words"))):
        vals = [m["split"].get(key) for m in summaries]
        ns = [(m["split"].get("counts") or {}).get(key) for m in summaries]
        xs = x + (k - 1.5) * width
        bars = ax.bar(xs, [0.0 if v is None else v for v in vals], width, label=label)
        for bar, v, n in zip(bars, vals, ns):
            if v is not None:
                top = max(top, float(v))
                ax.annotate("n/a" if n is None else f"n={n}", (bar.get_x() + bar.get_width() / 2, float(v)),
                            xytext=(0, 2), textcoords="offset points", ha="center", va="bottom", fontsize=6)
    for i, m in enumerate(summaries):
        if all(m["split"].get(k) is None for k in ("flagged_entity", "flagged_words", "derailed_entity",
                                                   "derailed_words")):
            ax.text(x[i], 1.0, "not judged", ha="center", va="bottom", fontsize=8, color="#666")
    ax.set_ylim(0, max(10.0, top * 1.2))
    ax.set_xticks(x, [m["model"] for m in summaries], fontsize=8)
    ax.set_ylabel("% of touched trials")
    ax.legend(fontsize=8)
    return fig
