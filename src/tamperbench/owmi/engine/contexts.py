"""Probe contexts of the tracks, as token ids with the intervened positions and the probe split.

Why token offsets rather than separately tokenized pieces: the model must see exactly the ids
the chat template gives for the whole text (the ids ``chat_ids`` returns), and the declared
positions ("the task text's tokens") must be found inside that tokenization. The fast
tokenizer's offset mapping does both.

Tracks (Section 3.3; the masked and delayed paths as defined here):

* ``A``: one user turn, task text then the probe; nothing generated yet.
* ``B_visible``: a fresh context holding the task, the run's own task output, then the probe.
* ``B_masked``: the probe alone (task and output withheld); the intervention acts on the only
  context before the probe, the system prompt and turn header.
* ``B_delayed`` / ``C``: the task turn was prefilled and generated under the intervention on the
  same cache; the probe (C: a neutral reflection prompt) arrives as a later user turn. Track C's
  contexts carry no system message by default (``OwmiSpec.track_c_system``): the introspection
  system prompt of the other tracks is itself an introspective cue.

``system`` is the system message (``None``: none given, the chat template's default applies).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Context:
    text: str  # the exact prompt text (chat template applied)
    ids: list[int]
    split: int  # ids[:split] is processed as prefill (declared positions altered), ids[split:] as probe
    declared: list[int]  # absolute positions the intervention alters during prefill


def _offsets(backend, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    enc = backend.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]


def _span(offsets, lo: int, hi: int) -> list[int]:
    return [i for i, (s, e) in enumerate(offsets) if s < hi and e > lo]


def _declared(offsets, task_lo: int, task_hi: int, split: int, mode: str) -> list[int]:
    if mode not in ("all", "task", "last"):  # absolute token indices, '0,1,2': those before the probe
        return [p for p in (int(x) for x in mode.split(",")) if p < split]
    if mode == "all" or task_lo < 0:
        return list(range(split))
    span = [i for i in _span(offsets, task_lo, task_hi) if i < split]
    return span[-1:] if mode == "last" else span


def build(backend, messages: list[dict], system: str | None, *, task_text: str | None, probe_text: str,
          positions: str) -> Context:
    """Context for ``messages`` whose last user turn ends with ``probe_text``; the declared
    positions are the tokens of ``task_text`` (or, without a task, everything before the probe)."""
    text = backend.chat_text(messages, system=system)
    ids, offsets = _offsets(backend, text)
    probe_at = text.rfind(probe_text)
    if probe_at < 0:
        raise ValueError("probe text not found in the rendered context")
    split = next((i for i, (s, _e) in enumerate(offsets) if s >= probe_at), len(ids))
    task_lo = text.find(task_text) if task_text else -1
    task_hi = task_lo + len(task_text) if task_text else -1
    return Context(text, ids, split, _declared(offsets, task_lo, task_hi, split, positions))


def task_context(backend, task_text: str, system: str | None, positions: str) -> Context:
    """The task turn alone (generation prompt appended); everything is prefill."""
    text = backend.chat_text([{"role": "user", "content": task_text}], system=system)
    ids, offsets = _offsets(backend, text)
    lo = text.find(task_text)
    return Context(text, ids, len(ids), _declared(offsets, lo, lo + len(task_text), len(ids), positions))


def track_a(backend, task_text, probe_text, system, positions) -> Context:
    msg = [{"role": "user", "content": f"{task_text}\n\n{probe_text}"}]
    return build(backend, msg, system, task_text=task_text, probe_text=probe_text, positions=positions)


def track_b_visible(backend, task_text, output_text, probe_text, system, positions) -> Context:
    msg = [{"role": "user", "content": task_text}, {"role": "assistant", "content": output_text},
           {"role": "user", "content": probe_text}]
    return build(backend, msg, system, task_text=task_text, probe_text=probe_text, positions=positions)


def track_b_masked(backend, probe_text, system, positions) -> Context:
    return build(backend, [{"role": "user", "content": probe_text}], system, task_text=None,
                 probe_text=probe_text, positions="all")


def later_turn(backend, task_text: str, output_text: str, probe_text: str, system: str | None) -> tuple[str, str]:
    """(full text, the text to append after the task turn and its output): the later user turn of
    a genuinely delayed probe, rendered by the chat template. The appended text starts after the
    task output; an end-of-turn marker the model already emitted is the caller's to drop."""
    first = backend.chat_text([{"role": "user", "content": task_text}], system=system)
    full = backend.chat_text([{"role": "user", "content": task_text}, {"role": "assistant", "content": output_text},
                              {"role": "user", "content": probe_text}], system=system)
    head = first + output_text
    if not full.startswith(head):  # the template rewrote the output (e.g. stripped whitespace)
        stripped = first + output_text.strip()
        if not full.startswith(stripped):
            raise ValueError("chat template does not reproduce the task turn; cannot append a later turn")
        head = stripped
    return full, full[len(head):]


def observer_prompt(record: str, probe_third: str) -> list[dict]:
    from tamperbench.owmi.protocol.probes import battery

    return [{"role": "user", "content": battery()["observer_frame"].replace("{record}", record) + probe_third}]
