"""A batch whose prompts would not fit is split into fewer rows, on the real embedded model.

Free memory is the one thing faked (a smaller machine): ``memory.free_bytes`` returns twice the
footprint of two rows, so the rule must choose 2 rows for 4 prompts; the answers must be those of
the unsplit batch, and the decoder's KV buffers must stay within the columns the rule assumed.
"""

from __future__ import annotations

import pytest

from tamperbench.models import memory

pytestmark = pytest.mark.model

WORDS = ("harbour ferry pier ledger tide crane rope anchor cargo beacon signal lantern dock "
         "hull keel mast sail chart compass storm").split()


def _convs():
    out = []
    for i in range(4):  # four different ~80-token prompts, lengths differ by a few words
        body = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(40 + 9 * i))
        out.append([{"role": "user", "content": f"Notes {i}: {body}\n\nName the first word of the notes."}])
    return out


def test_long_prompts_are_split_and_answers_unchanged(embedded_backend, monkeypatch):
    be = embedded_backend
    convs = _convs()
    new = 6
    whole = be.generate_chat(convs, max_new_tokens=new, progress=False, share_prefix=False)
    assert be.generation_stats["batch_rows"] == 4  # the machine's real memory: everything fits

    longest = max(len(g.prompt_ids) for g in whole)
    assert longest > 60
    budget = memory.footprint(be.model, 2, prompt_len=longest, new_tokens=new)
    assert memory.footprint(be.model, 3, prompt_len=longest, new_tokens=new) > budget
    monkeypatch.setattr(memory, "free_bytes", lambda device: 2 * budget)  # fraction 0.5 -> budget
    decoders = []
    plain = be.step_decoder

    def recording(**kw):
        decoders.append(plain(**kw))
        return decoders[-1]

    monkeypatch.setattr(be, "step_decoder", recording)
    split = be.generate_chat(convs, max_new_tokens=new, progress=False, share_prefix=False)
    assert be.generation_stats["batch_rows"] == 2
    assert decoders[-1].capacity == 2
    assert [g.token_ids for g in split] == [g.token_ids for g in whole]
    cols = decoders[-1].kv.layers[0].kbuf.shape[2]  # buffers only grow: their widest point
    assert cols <= memory.decoder_columns(longest, new)


def test_shared_prefix_path_is_split_too(embedded_backend, monkeypatch):
    """Prefix sharing admits rows through snapshots; the row cap holds for it as well."""
    be = embedded_backend
    doc = " ".join(WORDS * 3)
    convs = [[{"role": "user", "content": f"{doc}\n\nQuestion {q}: which word comes first?"}] for q in range(4)]
    whole = be.generate_chat(convs, max_new_tokens=4, progress=False)
    longest = max(len(g.prompt_ids) for g in whole)
    budget = memory.footprint(be.model, 2, prompt_len=longest, new_tokens=4)
    monkeypatch.setattr(memory, "free_bytes", lambda device: 2 * budget)
    split = be.generate_chat(convs, max_new_tokens=4, progress=False)
    assert be.generation_stats["batch_rows"] == 2 and be.generation_stats["shared_groups"] == 1
    assert [g.token_ids for g in split] == [g.token_ids for g in whole]
