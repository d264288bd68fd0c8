"""The ``choice`` read-out: a token-level read-out of each probe's closed option set.

Why: small models fail to write the probe's JSON (the paper's Sections 7.3 and 7.7: Qwen2.5-0.5B
left 83 to 88% of its reports unparsed; the embedded model here parses none), so a verbal read-out
measures the format before the content. This read-out asks the model nothing new and decodes
nothing: the probe context is fed exactly as under ``generated``, the answer's JSON prefix is
teacher-forced (``{"changed": "``), and each option of the family's closed set is scored by its
teacher-forced log-probability. Every report therefore "parses" by construction (parse rate 1), and
what is read is a token-level quantity, not a verbal report: C.7 keeps verbalised confidence and
token-level probabilities apart, and so do the records (``choice_g``, ``choice_logprobs``; the verbal
``graded`` and ``confidence`` stay empty) and every output (the read-out is part of the cell key).

Scoring. An option's score is the sum of its tokens' teacher-forced log-probabilities. An option whose
tokens are a proper prefix of another option's (layer "1" of layer "12") is followed by the JSON
delimiter that closes it (``"`` after a string, ``}`` after the layer number), so the closed set is
prefix-free and the option probabilities are parts of one distribution. Detection and confidence read
g = P(yes) / (P(yes) + P(no)) from the next-token log-probabilities (the continuous score the AUROC
uses) and "detected" = g > 1/2; localization, characterization and reconstruction report the option
of highest summed log-probability. A one-token option is read off the logits after the prefix; the
distributions inside longer options come from feeding the option trie's deepest proper prefixes on
copies of the row's cache (one forward per prefix length), under a fresh copy of the row's own
intervention in phase ``probe`` -- the hook the generated read-out's decoding steps run under, so the
intervention is applied identically. Rows per forward are bounded by ``BRANCH_BYTES`` of copied cache.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

BRANCH_BYTES = 256 * 2**20  # copied KV cache (plus its logits) per branch forward
CLOSED_FAMILIES: tuple[str, ...] = ("detection", "confidence", "localization", "characterization", "reconstruction")
SCORING = ("sum of the teacher-forced log-probabilities of the option's tokens after the teacher-forced JSON prefix; "
           "an option whose tokens are a proper prefix of another option's also takes the closing delimiter")


@dataclass(frozen=True)
class ClosedSet:
    """The options a family's JSON answer can take in its first field, and how that field is written."""

    family: str
    key: str
    options: tuple[str, ...]
    string: bool  # a JSON string ("yes") rather than a number (12)

    @property
    def prefix(self) -> str:
        return f'{{"{self.key}": "' if self.string else f'{{"{self.key}": '

    @property
    def close(self) -> str:
        return '"' if self.string else "}"

    def detail(self) -> dict:
        """What a record names as its read-out (``readout_detail``)."""
        return {"readout": "choice", "kind": "token-level read-out (not a verbal report)", "prefix": self.prefix,
                "options": list(self.options), "close": self.close, "score": SCORING}


def has_closed_set(family: str) -> bool:
    return family in CLOSED_FAMILIES


def closed_set(family: str, n_layers: int) -> ClosedSet:
    """The closed option set of ``family``; ValueError for a family without one (Track C's reflection)."""
    from tamperbench.owmi.probes import categories, concepts

    if family in ("detection", "confidence"):
        return ClosedSet(family, "changed", ("yes", "no"), True)
    if family == "localization":
        return ClosedSet(family, "layer", tuple(str(i) for i in range(n_layers)), False)
    if family == "characterization":
        return ClosedSet(family, "category", tuple(categories()), True)
    if family == "reconstruction":
        return ClosedSet(family, "concept", tuple(concepts()), True)
    raise ValueError(f"probe family {family!r} has no closed option set")


_TOKENS: dict[tuple, tuple[list[int], list[list[int]]]] = {}


def _proper_prefix(a: Sequence[int], others: Sequence[Sequence[int]]) -> bool:
    return any(len(b) > len(a) and list(b[: len(a)]) == list(a) for b in others)


def tokenize(tokenizer, cs: ClosedSet) -> tuple[list[int], list[list[int]]]:
    """(prefix ids, each option's ids). An option's ids are the tail of the tokenization of prefix +
    option where that starts with the prefix's own ids (the text a model would write), else the option
    tokenized on its own; an option whose ids are a proper prefix of another's (layer 1 of layer 12)
    takes its closing delimiter too, so the set is prefix-free and its probabilities add up."""
    key = (id(tokenizer), cs)
    if key not in _TOKENS:
        enc = lambda s: list(tokenizer(s, add_special_tokens=False)["input_ids"])  # noqa: E731
        pre = enc(cs.prefix)

        def tail(text: str) -> list[int]:
            full = enc(cs.prefix + text)
            return full[len(pre):] if full[: len(pre)] == pre and len(full) > len(pre) else enc(text)

        bare = [tail(o) for o in cs.options]
        opts = [tail(o + cs.close) if _proper_prefix(b, bare) else b for o, b in zip(cs.options, bare)]
        clash = [o for o, ids in zip(cs.options, opts) if _proper_prefix(ids, opts) or opts.count(ids) > 1]
        if clash:
            raise ValueError(f"{cs.family}: options {clash} are not distinct token sequences under this tokenizer")
        _TOKENS[key] = (pre, opts)
    return _TOKENS[key]


# branch(parents, blocks): logits (len(parents), L, V) of feeding the equal-length ``blocks`` (L tokens
# each) on copies of rows ``parents``, each under its parent row's intervention
Branch = Callable[[list[int], list[list[int]]], torch.Tensor]


def score_options(logits: torch.Tensor, options: Sequence[Sequence[int]], branch: Branch, row_bytes: int) -> torch.Tensor:
    """Summed log-probabilities (rows, options), float64, from ``logits`` (rows, V) after the prefix.

    The options form a trie: the first token is read off ``logits``; every longer option needs the
    distribution after each of its proper prefixes, got by feeding only the trie's deepest proper
    prefixes (one branch row per row and such prefix: all layers 10-19 share the fed "1")."""
    lp0 = torch.log_softmax(logits.float(), dim=-1)
    rows, vocab = lp0.shape
    out = torch.zeros(rows, len(options), dtype=torch.float64)
    for k, ids in enumerate(options):
        out[:, k] = lp0[:, ids[0]].double()
    wanted: dict[tuple, set[int]] = {}  # proper prefix -> the next tokens some option reads after it
    for ids in options:
        for j in range(1, len(ids)):
            wanted.setdefault(tuple(ids[:j]), set()).add(ids[j])
    deepest = [p for p in wanted if not _proper_prefix(p, list(wanted))]
    got: dict[tuple, dict[int, torch.Tensor]] = {}  # (row, prefix) -> next token -> log-prob
    for n in sorted({len(p) for p in deepest}):
        jobs = [(r, p) for r in range(rows) for p in deepest if len(p) == n]
        per = max(1, BRANCH_BYTES // max(1, row_bytes + 2 * n * vocab * 4))
        for lo in range(0, len(jobs), per):
            part = jobs[lo: lo + per]
            lps = torch.log_softmax(branch([r for r, _ in part], [list(p) for _, p in part]).float(), -1)
            for i, (r, p) in enumerate(part):
                for j in range(1, n + 1):
                    toks = sorted(wanted[p[:j]])
                    got[(r, p[:j])] = dict(zip(toks, lps[i, j - 1, toks].double().tolist()))
            del lps
    for k, ids in enumerate(options):
        for j in range(1, len(ids)):
            for r in range(rows):
                out[r, k] += got[(r, tuple(ids[:j]))][ids[j]]
    return out


def cache_row_bytes(cache) -> int:
    """Bytes of one row of a KV cache (what a branch copies per option row)."""
    layers = getattr(cache, "layers", [])
    tot = 0
    for layer in layers:
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if t is not None and t.dim() and t.shape[0]:
                tot += t[0].numel() * t.element_size()
    return tot


def fields(cs: ClosedSet, lps: Sequence[float]) -> dict:
    """The record fields of one row's option scores: parsed by construction, token-level fields only."""
    lps = [float(x) for x in lps]
    best = max(range(len(lps)), key=lambda i: lps[i])
    out: dict = {"parse_ok": True, "parse_error": None, "corrupted": False,
                 "choice_logprobs": json.dumps(dict(zip(cs.options, lps)))}
    if cs.family in ("detection", "confidence"):
        top = max(lps[0], lps[1])
        g = math.exp(lps[0] - top) / (math.exp(lps[0] - top) + math.exp(lps[1] - top))
        out.update(choice_g=g, detected=g > 0.5)
    elif cs.family == "localization":
        out["layer_report"] = int(cs.options[best])
    elif cs.family == "characterization":
        out["category_report"] = cs.options[best]
    else:
        out["concept_report"] = cs.options[best]
    return out
