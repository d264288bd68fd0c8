"""Plots people would rather look at than read: where a swap jolts the model, and how copies fail.

Each function reads records straight from a run's store and writes one PNG (matplotlib's Agg
backend, so it works headless on a cluster node).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

SIGNAL_LABELS = {"surprisal": "surprisal (nats)", "entropy_top20": "top-20 entropy (nats)",
                 "entropy_full": "full-vocabulary entropy (nats)"}


def swap_aligned_profiles(clean_rows: list[dict], trial_rows: list[dict], window: int = 8) -> dict:
    """Mean signal at each of the ``window`` tokens each swap's Delta collects, next to the matched branch.

    The offsets are exactly the tokens of the reference rule's window (``sleight.metrics.reference_window``:
    the next ``window`` non-injected tokens after the swap), so the plot shows what Tables 1 and 2 average.
    ``baseline`` is the mean over touched trials of their clean answer's mean (what each trial's Delta
    subtracts) and ``delta`` the reference-rule Delta of the tables (mean over touched trials).
    """
    from tamperbench.sleight.metrics import reference_window, trial_delta

    clean_by_key = {c["key"]: c for c in clean_rows}
    out = {}
    for signal in SIGNAL_LABELS:
        tampered: list[list[float]] = [[] for _ in range(window)]
        matched: list[list[float]] = [[] for _ in range(window)]
        baselines, deltas = [], []
        for t in trial_rows:
            clean = clean_by_key.get(t["clean_key"])
            if t["untouched"] or not t["swap_positions"] or clean is None:
                continue
            values = list(clean[signal][: t["fork_at"]]) + list(t[signal])
            injected_set = set(t["injected"])
            injected = [i in injected_set for i in range(len(values))]
            swaps = list(zip(t["swap_positions"], t["swap_injected"]))
            for (swap_pos, _), branch in zip(swaps, t[f"matched_{signal}"]):
                for k, i in enumerate(reference_window(swap_pos, injected, window)):
                    tampered[k].append(values[i])
                for k, v in enumerate(branch[:window]):
                    matched[k].append(v)
            d = trial_delta(values, injected, swaps, clean[signal], window, "reference")
            if d is not None and np.isfinite(d) and clean[signal]:
                deltas.append(d)
                baselines.append(float(np.mean(clean[signal])))
        out[signal] = {
            "tampered": [float(np.mean(x)) if x else None for x in tampered],
            "matched": [float(np.mean(x)) if x else None for x in matched],
            "n_swaps": [len(x) for x in tampered],
            "clean_mean": float(np.mean(baselines)) if baselines else None,
            "delta": float(np.mean(deltas)) if deltas else None,
            "window_rule": "reference",
        }
    return out


def plot_swap_profiles(profiles: dict, path: Path, title: str) -> Path:
    fig, axes = plt.subplots(1, len(profiles), figsize=(5 * len(profiles), 3.6), squeeze=False)
    for ax, (signal, prof) in zip(axes[0], profiles.items()):
        xs = np.arange(1, len(prof["tampered"]) + 1)
        tam = np.array([np.nan if v is None else v for v in prof["tampered"]], dtype=float)
        mat = np.array([np.nan if v is None else v for v in prof["matched"]], dtype=float)
        ax.plot(xs, tam, "o-", color="tab:red", label="after the swap (tampered)")
        ax.plot(xs, mat, "s--", color="tab:blue", label="same prefix, trigger kept (matched)")
        if prof["clean_mean"] is not None:
            ax.axhline(prof["clean_mean"], color="grey", lw=1, ls=":", label="clean answer mean (baseline)")
        if prof.get("delta") is not None:
            ax.set_title(f"Δ = {prof['delta']:+.3f} nats (reference rule)", fontsize=9)
        ax.set_xlabel("k-th non-injected token after the swap")
        ax.set_ylabel(SIGNAL_LABELS[signal])
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="best")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_quote_categories(rows: list[dict], path: Path, title: str) -> Path:
    """Stacked bars: share of each verdict category per instruction arm."""
    arms = sorted({r["arm"] for r in rows})
    cats = [c for c, _ in Counter(r["category"] for r in rows).most_common()]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    bottom = np.zeros(len(arms))
    for cat in cats:
        share = np.array([
            sum(r["category"] == cat for r in rows if r["arm"] == arm) / max(1, sum(r["arm"] == arm for r in rows))
            for arm in arms
        ])
        ax.bar(arms, share * 100, bottom=bottom * 100, label=cat)
        bottom += share
    ax.set_ylabel("% of responses")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, bbox_to_anchor=(1.02, 1), loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_label_rates(rates: dict[str, float | None], path: Path, title: str) -> Path:
    labels = list(rates)
    values = [0.0 if rates[k] is None else 100 * rates[k] for k in labels]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.bar(labels, values, color="tab:purple")
    ax.set_ylabel("% of judged replies")
    ax.set_ylim(0, 100)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
