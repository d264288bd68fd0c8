"""The ``choice`` read-out: a token-level read-out of each probe's closed option set.

Why: small models fail to write the probe's JSON (the paper's Sections 7.3 and 7.7: Qwen2.5-0.5B
left 83 to 88% of its reports unparsed; the embedded model here parses none), so a verbal read-out
measures the format before the content. This read-out asks the model nothing new and decodes
nothing: the probe context is fed exactly as under ``generated``, the answer's JSON prefix is
teacher-forced (``{"changed": "``), and each option of the family's closed set is scored by its
teacher-forced log-probability. Nothing is decoded, so nothing can fail to parse; a row is unscorable
instead when its options carry less than ``MIN_OPTION_MASS`` of the probability after the prefix (its
``parse_ok`` is False and the cell's parse rate counts it), and what is read is a token-level quantity, not a verbal report: C.7 keeps verbalised confidence and
token-level probabilities apart, and so do the records (``choice_g``, ``choice_logprobs``; the verbal
``graded`` and ``confidence`` stay empty) and every output (the read-out is part of the cell key).

Scoring. A written option's score is the sum of its tokens' teacher-forced log-probabilities. Every
layer number is followed by the JSON delimiter that closes it (``}``: layer "3" as "3}" like layer "1",
which would otherwise prefix "12"); a string option is closed by ``"`` only where its tokens would
otherwise be a proper prefix of another option's. Closing every string was tried and is wrong: BPE
tokenizers write the closing quote merged with what follows (SmolLM2 writes ``yes",`` as ``yes`` +
``",`` and ``yes"}`` as ``yes`` + ``"}``), so a lone ``"`` token carries little probability and a model
fine-tuned to answer "yes" scored as unscorable. Either way the closed set is prefix-free and the
option probabilities are parts of one distribution. An option's probability sums
its written variants ("yes", "Yes", "YES", each with and without a leading space: distinct tokens to
the embedded model's tokenizer, and the generated read-out's parser reads them all as "yes"). The
mass the whole set carries after the prefix is recorded (``choice_mass``); under ``MIN_OPTION_MASS``
the row is unscorable. Detection and confidence read g = P(yes) / (P(yes) + P(no)) (the continuous
score the AUROC uses) and "detected" = g > 1/2; localization, characterization and reconstruction report the option
of highest summed log-probability. An option's first token is read off the logits after the prefix;
the distributions inside longer options come from the option trie, in phase ``probe`` under the row's
own intervention -- the hook the generated read-out's decoding steps run under, so the intervention is
applied identically:

* the batched engine (:func:`score_rows`) feeds every row's whole trie as one packed block, one
  forward per family on that family's rows (``ragged.Rows.tree``: each node attends to its row's cache
  and its own ancestors, at its own position), so no row is padded to another family's wider trie;
* the reference engine (:func:`score_options`, the oracle the batched one is tested against) feeds
  the trie's deepest proper prefixes on copies of the row's cache, one forward per prefix length,
  rows per forward bounded by ``BRANCH_BYTES`` of copied cache.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

BRANCH_BYTES = 256 * 2**20  # copied KV cache (plus its logits) per branch forward
CLOSED_FAMILIES: tuple[str, ...] = ("detection", "confidence", "localization", "characterization", "reconstruction")
SCORING = ("sum of the teacher-forced log-probabilities of the option's tokens (a layer number closed by '}', a "
           "string closed by '\"' only where it would prefix another option), after the "
           "teacher-forced JSON prefix; an option's probability is the sum over its written variants (lower, "
           "Capitalized and UPPER case for string options, each with and without a leading space)")
# An option set carrying less probability than this after the forced prefix (P of every variant of every
# option, ``choice_mass``) does not say what the model would answer: such a row is recorded as unscorable
# (parse_ok False, choice_scorable False, parse_error naming this constant), so each cell's report-parse
# rate counts it and no detection statistic reads it.
MIN_OPTION_MASS = 0.1
UNSCORABLE = "option mass {mass:.3g} < MIN_OPTION_MASS {min}: unscorable (the options carry too little probability)"
# Under the active scope the hook stays on at the answer slot, so what g reads there is the hook's
# first-order effect on the next-token distribution, not a report (Section 3.6): such records say so.
ACTIVE_LABEL = "first-order leakage"


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

    def variants(self, option: str, closed: bool | None = None) -> tuple[str, ...]:
        """The written forms of ``option`` whose probabilities are summed: every form the generated read-out's
        parser reads as this option (it lower-cases and strips strings), lower/Capitalized/UPPER for strings,
        each with and without a leading space; closed by ``close`` when ``closed`` (default: numbers only;
        ``tokenize`` closes a string where it would prefix another option)."""
        closed = (not self.string) if closed is None else closed
        cases = [option, option.capitalize(), option.upper()] if self.string else [option]
        end = self.close if closed else ""
        return tuple(dict.fromkeys(f"{sp}{c}{end}" for c in cases for sp in ("", " ")))

    def detail(self, scope: str | None = None) -> dict:
        """What a record names as its read-out (``readout_detail``); ``scope`` the record's hook scope
        (active: labelled first-order leakage, Section 3.6)."""
        out = {"readout": "choice", "kind": "token-level read-out (not a verbal report)", "prefix": self.prefix,
               "options": list(self.options), "close": self.close, "variants": "case and leading-space variants summed",
               "score": SCORING, "min_option_mass": MIN_OPTION_MASS}
        if scope == "active":
            out["label"] = ACTIVE_LABEL
            out["label_reason"] = ("active scope: the hook is on at the answer slot, so g is first-order leakage "
                                   "by construction (Section 3.6)")
        return out


def has_closed_set(family: str) -> bool:
    return family in CLOSED_FAMILIES


def closed_set(family: str, n_layers: int) -> ClosedSet:
    """The closed option set of ``family``; ValueError for a family without one (Track C's reflection)."""
    from tamperbench.owmi.protocol.probes import categories, concepts

    if family in ("detection", "confidence"):
        return ClosedSet(family, "changed", ("yes", "no"), True)
    if family == "localization":
        return ClosedSet(family, "layer", tuple(str(i) for i in range(n_layers)), False)
    if family == "characterization":
        return ClosedSet(family, "category", tuple(categories()), True)
    if family == "reconstruction":
        return ClosedSet(family, "concept", tuple(concepts()), True)
    raise ValueError(f"probe family {family!r} has no closed option set")


_TOKENS: dict[tuple, Tokens] = {}


@dataclass(frozen=True)
class Tokens:
    """A closed set under a tokenizer: the forced prefix's ids, every variant's ids (``seqs``) and the
    option each variant belongs to (``owner``, an index into ``ClosedSet.options``)."""

    prefix: list[int]
    seqs: list[list[int]]
    owner: list[int]


def _proper_prefix(a: Sequence[int], others: Sequence[Sequence[int]]) -> bool:
    return any(len(b) > len(a) and list(b[: len(a)]) == list(a) for b in others)


def tokenize(tokenizer, cs: ClosedSet) -> Tokens:
    """The prefix ids and each option variant's ids. A variant's ids are the tail of the tokenization of
    prefix + variant where that starts with the prefix's own ids (the text a model would write), else the
    variant tokenized on its own. A layer number ends with its closing delimiter, and a string variant
    whose ids are a proper prefix of another option's gets one too, so no option's variant is a proper
    prefix of another's (layer 1 of layer 12, yes of yesterday) and the probabilities add up; a clash
    left (two options writing the same ids) is refused with the options named."""
    key = (id(tokenizer), cs)
    if key not in _TOKENS:
        enc = lambda s: list(tokenizer(s, add_special_tokens=False)["input_ids"])  # noqa: E731
        pre = enc(cs.prefix)

        def tail(text: str) -> list[int]:
            full = enc(cs.prefix + text)
            return full[len(pre):] if full[: len(pre)] == pre and len(full) > len(pre) else enc(text)

        cand = [(tail(v), tail(c), k) for k, o in enumerate(cs.options)
                for v, c in zip(cs.variants(o), cs.variants(o, closed=True))]
        seqs, owner = [], []
        for ids, closed_ids, k in cand:
            o = cs.options[k]
            if cs.string and _proper_prefix(ids, [b for b, _, j in cand if j != k]):
                ids = closed_ids  # "yes" of "yesterday": closed by its delimiter
            if ids not in seqs:
                seqs.append(ids)
                owner.append(k)
            elif owner[seqs.index(ids)] != k:
                raise ValueError(f"{cs.family}: options {[cs.options[owner[seqs.index(ids)]], o]} are not distinct "
                                 "token sequences under this tokenizer")
        clash = sorted({cs.options[k] for ids, k in zip(seqs, owner) if _proper_prefix(ids, seqs)})
        if clash:
            raise ValueError(f"{cs.family}: options {clash} are not distinct token sequences under this tokenizer")
        _TOKENS[key] = Tokens(pre, seqs, owner)
    return _TOKENS[key]


def option_scores(seq_scores: torch.Tensor, owner: Sequence[int], n_options: int) -> torch.Tensor:
    """(rows, options) log-probabilities: each option's variants summed in probability (logsumexp)."""
    own = torch.tensor(list(owner))
    return torch.stack([torch.logsumexp(seq_scores[:, own == k], dim=1) for k in range(n_options)], dim=1)


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


# tree(rows, nodes): logits (len(rows), W, V) of feeding, on each of batch rows ``rows``, its option trie
# ``nodes[i]`` as one packed block (``ragged.Rows.tree``): node j of rows[i], at column W - len(nodes[i]) + j, is
# the distribution after that node's prefix; the other rows of the batch are not fed
Tree = Callable[[list[int], list[list[tuple[int, int]]]], torch.Tensor]
TREE_BYTES = 512 * 2**20  # float32 logits of one packed-trie forward (rows x nodes x vocabulary)


def trie(seqs: Sequence[Sequence[int]]) -> tuple[list[tuple[int, int]], dict[tuple, int]]:
    """The proper prefixes (length >= 1) of ``seqs`` as packed-trie nodes: (token, parent node or -1),
    parents first; and prefix -> node index. A node's logits are the distribution after its prefix."""
    nodes: list[tuple[int, int]] = []
    at: dict[tuple, int] = {}
    for ids in seqs:
        for j in range(1, len(ids)):
            p = tuple(ids[:j])
            if p not in at:
                at[p] = len(nodes)
                nodes.append((int(ids[j - 1]), at.get(p[:-1], -1)))
    return nodes, at


def score_rows(logits: torch.Tensor, per_row: Sequence[Sequence[Sequence[int]]], tree: Tree,
               vocab: int) -> list[torch.Tensor]:
    """Summed log-probabilities (float64) of ``per_row[r]``'s sequences after row r's ``logits`` (rows, V).
    The rows sharing one option trie (one probe family) are fed it in one packed forward (``tree``) on those
    rows alone, so no row is padded to a wider family's trie (localization's 61 nodes against detection's
    2); rows split so one forward's logits stay under ``TREE_BYTES``. The same sums as
    :func:`score_options`, without a copy of any cache."""
    lp0 = torch.log_softmax(logits.float(), dim=-1)
    tries = [trie(seqs) for seqs in per_row]
    out = [torch.zeros(len(seqs), dtype=torch.float64) for seqs in per_row]
    for r, seqs in enumerate(per_row):
        first = torch.tensor([ids[0] for ids in seqs])
        out[r] += lp0[r, first].double()
    same: dict[tuple, list[int]] = {}  # trie -> the rows reading it
    for r in range(len(per_row)):
        if tries[r][0]:
            same.setdefault(tuple(tries[r][0]), []).append(r)
    for nodes_key, rows in same.items():
        per = max(1, TREE_BYTES // max(1, len(nodes_key) * vocab * 4))
        for lo in range(0, len(rows), per):
            part = rows[lo: lo + per]
            got = tree(part, [tries[r][0] for r in part])
            for i, r in enumerate(part):
                nodes, at = tries[r]
                lp = torch.log_softmax(got[i, got.shape[1] - len(nodes):].float(), dim=-1)
                for k, ids in enumerate(per_row[r]):
                    out[r][k] += sum(float(lp[at[tuple(ids[:j])], ids[j]]) for j in range(1, len(ids)))
            del got
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
    """The record fields of one row's option log-probabilities (variants summed): token-level fields only,
    the option mass (``choice_mass``) and whether it reaches ``MIN_OPTION_MASS`` (else unscorable)."""
    lps = [float(x) for x in lps]
    best = max(range(len(lps)), key=lambda i: lps[i])
    mass = math.fsum(math.exp(x) for x in lps)
    ok = mass >= MIN_OPTION_MASS
    # corrupted None: nothing is decoded, so corruption is not measurable under this read-out
    out: dict = {"parse_ok": ok, "parse_error": None if ok else UNSCORABLE.format(mass=mass, min=MIN_OPTION_MASS),
                 "corrupted": None, "choice_mass": mass, "choice_scorable": ok,
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
