"""Synthetic Sleight of Word runs, written through the real records and store, with no model.

Why: the report site must be tested on hostile text (``<script>`` in a reply) and measured at the
paper preset's scale (100 questions x 101 words = 10,100 trials), neither of which a 2-core CPU run of
a real model gives in seconds. Every value is drawn from a seeded generator, so a synthetic run is the
same on every machine. Nothing here is ever mixed into a real run: the provenance says ``synthetic``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import tamperbench
from tamperbench.models.provenance import ModelProvenance
from tamperbench.sleight.spec import SleightSpec
from tamperbench.sleight.records import (CLEAN_TABLE, TRIALS_TABLE, SleightClean, SleightTrial, clean_key,
                                         trial_record_key)
from tamperbench.store import RunStore


def synthetic_provenance(name: str = "synthetic-model", tokenizer_dir: str = "") -> ModelProvenance:
    return ModelProvenance(source=name, kind="synthetic", resolved_path=tokenizer_dir, sha256="0" * 64,
                           architecture="synthetic", tamperbench_version=tamperbench.__version__)


def write_synthetic_run(out: Path, *, questions: int = 3, words: int = 3, tokens: int = 24, seed: int = 0,
                        replies: dict[int, str] | None = None, model: str = "synthetic-model",
                        question_text: str | None = None) -> Path:
    """A run of ``questions x words`` touched trials with one swap each at token 4.

    ``replies`` overrides the reply text of chosen trial indices (e.g. with markup for escaping tests);
    ``question_text`` replaces every question's text.
    """
    rng = np.random.default_rng(seed)
    qs = tuple((f"q{i:03d}", question_text or f"synthetic question {i}?") for i in range(questions))
    subs = tuple(["Mandela effect"] + [f"word{i}" for i in range(1, words)])[:words]
    spec = SleightSpec(model=model, preset="synthetic", questions=qs, substitutions=subs, triggers=("the",),
                       max_new_tokens=tokens)
    store = RunStore.open(out, spec, new=True)
    try:
        store.ensure_table(CLEAN_TABLE, SleightClean)
        store.ensure_table(TRIALS_TABLE, SleightTrial)
        pid = store.put_provenance(synthetic_provenance(model))
        cleans, trials, k = [], [], 0
        for qid, q in qs:
            ids = [int(x) for x in rng.integers(100, 5000, tokens)]
            s = [round(float(x), 3) for x in rng.gamma(2.0, 0.6, tokens)]
            e = [round(float(x), 3) for x in rng.gamma(2.0, 0.8, tokens)]
            ck = clean_key(pid, qid, q, spec)
            cleans.append(SleightClean(key=ck, provenance_id=pid, model=model, question_id=qid, question=q,
                                       prompt_text=q, prompt_ids=[1, 2, 3], max_new_tokens=tokens, token_ids=ids,
                                       text=f"clean answer to {q}", surprisal=s, entropy_full=e, entropy_top20=e,
                                       whole_word_occurrences=1, finish_reason="length", thinking=False,
                                       decode_seconds=0.0))
            for w in subs:
                fork = 4
                n = tokens - fork
                ts = [round(float(x), 3) for x in rng.gamma(2.0, 0.9, n)]
                te = [round(float(x), 3) for x in rng.gamma(2.0, 1.0, n)]
                text = (replies or {}).get(k, f"reply {k}: {w} answer to {q}")
                trials.append(SleightTrial(
                    key=trial_record_key(pid, qid, q, w, spec), provenance_id=pid, model=model, question_id=qid,
                    question=q, prompt_text=q, trigger="the", substitution=w, entity=(w == "Mandela effect"),
                    clean_key=ck, reaction_text=text, fork_at=fork, n_tokens=tokens,
                    token_ids=[int(x) for x in rng.integers(100, 5000, n)], surprisal=ts, entropy_full=te,
                    entropy_top20=te, injected=[fork], swap_positions=[fork], swap_injected=[1],
                    matched_surprisal=[s[fork + 1:fork + 9]], matched_entropy_full=[e[fork + 1:fork + 9]],
                    matched_entropy_top20=[e[fork + 1:fork + 9]], swap_count=1, mentions=0, spaceless=0,
                    occurrences=1, coverage=1.0, untouched=False, thinking=False, finish_reason="length",
                    decode_seconds=0.0))
                k += 1
        store.write(CLEAN_TABLE, cleans)
        for i in range(0, len(trials), 2000):
            store.write(TRIALS_TABLE, trials[i:i + 2000])
    finally:
        store.close()
    return Path(out)
