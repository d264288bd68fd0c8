"""One model identity per set of weights run: (model, model_revision, dtype, quantized).

Why not the model name: one name can be run at two dtypes, at two revisions, or as a dequantized
GGUF beside its full-precision weights, and Appendix D.4 never pools runs of different precision.
Everything the scorer says at the model level (variance components, decay verdict counts, the
model-level claim lines) is therefore keyed by this tuple, the same one ``profile._pools`` uses
for its per-model pools. A dequantized GGUF read at float32 keeps ``quantized=True`` and so is a
different identity from real float32 weights.

Readers need a short name, leaderboards need exact fields: ``labels`` gives every identity a
readable label that is unambiguous within one run set, and ``fields`` the machine-readable
fields that go into the JSON beside it.
"""

from __future__ import annotations

from collections.abc import Iterable

FIELDS = ("model", "model_revision", "dtype", "quantized")
REV_CHARS = 12  # the revision prefix the pool labels show (profile._pools)


def of(row: dict) -> tuple:
    """The identity of a run row or a cell dict; a missing quantized flag reads as full precision,
    as in ``profile._pools``, so old records without it are not split from new ones."""
    return (row.get("model"), row.get("model_revision"), row.get("dtype"), bool(row.get("quantized")))


def value(row: dict, field: str):
    """``row[field]`` as a cell key uses it: the quantized flag normalised like ``of``, and a missing
    read-out read as ``generated`` (records written before the read-out was recorded decoded their answers)."""
    if field == "readout":
        return row.get("readout") or "generated"
    return bool(row.get(field)) if field == "quantized" else row.get(field)


def readout(row: dict) -> str:
    """The read-out of a run row or cell (``generated`` where none is recorded)."""
    return str(value(row, "readout"))


def fields(ident: tuple) -> dict:
    """The machine-readable fields of an identity (a leaderboard joins on these, not on the label)."""
    return dict(zip(FIELDS, ident))


def rev_chars(revisions: Iterable) -> int:
    """How many leading characters of a revision a label shows: 12, or more where two distinct
    revisions of the set share their first 12 (a label must never merge two sets of weights)."""
    revs = {str(r) for r in revisions}
    n = REV_CHARS
    while len({r[:n] for r in revs}) < len(revs):
        n += 1
    return n


def labels(idents: Iterable[tuple]) -> dict[tuple, str]:
    """``name @ rev float32`` (``+ " (quantized)"``) for each identity, distinct across the set.

    The revision is cut to 12 characters like the pool labels, longer where two revisions share
    those 12 (so the label never merges them). Names are untrusted: a name containing `` @ `` or a
    dtype string can still make two labels equal, and then the later identity (in sorted order)
    gets a `` #2``, `` #3`` suffix rather than silently sharing a label.
    """
    ids = sorted(set(idents), key=lambda i: tuple(map(str, i)))
    n = rev_chars(i[1] for i in ids)
    out: dict[tuple, str] = {}
    used: set[str] = set()
    for i in ids:
        base = f"{i[0]} @ {str(i[1])[:n]} {i[2]}{' (quantized)' if i[3] else ''}"
        label, k = base, 1
        while label in used:
            k += 1
            label = f"{base} #{k}"
        used.add(label)
        out[i] = label
    return out


def keys(idents: Iterable[tuple]) -> dict[tuple, str]:
    """The JSON key of each identity's model-level entry (``result["variance"]``): the bare model
    name where the run set holds that name under one identity only, so the output of a
    single-identity run keeps its keys; the full label where the name has several identities.
    A name equal to another identity's label is hostile; it falls back to its own label too."""
    ids = set(idents)
    lab = labels(ids)
    out = {i: str(i[0]) for i in ids}
    while True:  # a name held by several identities clashes with itself: all of them take their labels;
        # labels are distinct, so each round turns at least one clashing name into its label
        taken = list(out.values())
        clash = [i for i, k in out.items() if taken.count(k) > 1 and k != lab[i]]
        if not clash:
            return out
        out.update({i: lab[i] for i in clash})


def result_labels(result: dict) -> dict[tuple, str]:
    """The labels of every identity in a score result (its cells and decay cells), for the renderers:
    computed from the whole set so that each table names one identity the same way."""
    cells = [c["cell"] for c in result.get("cells") or []]
    cells += [c["cell"] for c in (result.get("decay") or {}).get("cells", [])]
    return labels(of(c) for c in cells)
