"""Table schemas the judge writes into a run's database, and reading the sleight records it judges.

Tables (all carry ``trial_key`` = the ``key`` of the judged ``sleight_trials`` row):

* ``judge_votes``       one row per (trial, judge, judge config): raw text, parsed labels, parse status
* ``judge_verdicts``    one row per trial: the jury's majority per label (NULL = no majority)
* ``judge_evidence``    one row per trial: the rule-based evidence detector
* ``human_labels``      one row per (trial, annotator): the gold set
* ``judge_agreement``   kappas and accuracies, recomputed on each ``judge run`` / ``judge agreement``
* ``judge_parse_rates`` unparsed rates per judge
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional


from tamperbench.errors import UserError
from tamperbench.store import Record, RunStore

SLEIGHT_TABLE = "sleight_trials"
SLEIGHT_COLUMNS = ("key", "question_id", "question", "trigger", "substitution", "reaction_text", "swap_count",
                   "untouched")


class JudgeVoteRecord(Record):
    trial_key: str
    judge: str
    config_id: str
    status: str  # parsed | parsed_on_retry | partial | unparsed
    flagged: Optional[bool]
    corrected: Optional[bool]
    derailed: Optional[bool]
    aware: Optional[bool]
    confidence: Optional[float]
    rationale: Optional[str]
    parse_error: Optional[str]
    attempts: int
    raw_text: str
    retry_text: Optional[str]
    prompt_text: str
    retry_prompt_text: Optional[str]
    finish_reason: str
    fence: str
    fence_nonce: Optional[str]
    defused_special_tokens: int
    prompt_version: str
    prompt_sha256: str
    max_new_tokens: int
    temperature: float
    seed: int
    # NULL in votes stored before these existed: robust parse, safe text, the template's own thinking
    parse_rule: Optional[str] = None  # robust | reference (judge/parse.py)
    judged_text: Optional[str] = None  # safe | reference
    thinking: Optional[str] = None  # default | on | off (judge/thinking.py)
    template_kwargs: Optional[dict] = None  # what the judge's chat template was given
    thinking_effect: Optional[str] = None  # whether the template reacted to it
    # judge run --constrained: decoded under the verdict schema's grammar; ``grammar`` holds its
    # provenance (schema text, sha256, JSON options, library version; judge/constrained.py)
    constrained: bool = False
    grammar: Optional[dict] = None


class JudgeVerdictRecord(Record):
    trial_key: str
    flagged: Optional[bool]
    corrected: Optional[bool]
    derailed: Optional[bool]
    aware: Optional[bool]
    ignored: Optional[bool]
    n_judges: int
    jury: list[str]
    config_id: str
    tally: dict
    unparsed_rule: str = "abstain"  # abstain | false (tamperbench.labels.UNPARSED_RULES)


class JudgeEvidenceRecord(Record):
    trial_key: str
    flagged: bool  # the reference's detector (judge/evidence.py)
    aware: bool
    cues: list[str]
    snippets: list[str]
    detector_version: str
    flagged_extended: Optional[bool] = None  # reference + tamperbench cues (None: detector v1)
    aware_extended: Optional[bool] = None


class HumanLabelRecord(Record):
    trial_key: str
    annotator: str
    flagged: bool
    corrected: bool
    derailed: bool
    aware: bool
    note: str
    sample_seed: int


class AgreementRecord(Record):
    kind: str  # cohen_pair | fleiss | evidence_vs_jury | judge_vs_human
    label: str
    rater_a: str
    rater_b: str
    n: int
    kappa: Optional[float]
    accuracy: Optional[float]
    config_id: str


class ParseRateRecord(Record):
    judge: str
    config_id: str
    n_votes: int
    n_parsed: int
    n_parsed_on_retry: int
    n_partial: int
    n_unparsed: int
    unparsed_rate: float


@dataclass(frozen=True)
class SleightTrial:
    key: str
    question_id: str
    question: str
    trigger: str
    substitution: str
    reaction_text: str
    swap_count: int
    untouched: bool
    reaction_text_special: str | None = None  # decoded with special tokens; None in runs stored before it

    @property
    def judgeable(self) -> bool:
        """Judged only with at least one swap and a non-empty reply (untouched trials are counted)."""
        return self.swap_count >= 1 and not self.untouched and bool(self.reaction_text.strip())


def read_sleight_trials(store: RunStore) -> list[SleightTrial]:
    """All sleight records of a run; a run without any is a user error naming the run and table."""
    if not store.has_table(SLEIGHT_TABLE) or store.count(SLEIGHT_TABLE) == 0:
        raise UserError(f"{store.run_dir}: no sleight records (table {SLEIGHT_TABLE} is missing or empty); "
                        "run `tamperbench sleight run` into this directory first")
    have = {c for (c,) in store.con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [SLEIGHT_TABLE]).fetchall()}
    missing = [c for c in SLEIGHT_COLUMNS if c not in have]
    if missing:
        raise UserError(f"{store.run_dir}: table {SLEIGHT_TABLE} lacks columns {', '.join(missing)}")
    cols = ", ".join(f'"{c}"' for c in SLEIGHT_COLUMNS)
    special = '"reaction_text_special"' if "reaction_text_special" in have else "NULL"
    rows = store.con.execute(f'SELECT {cols}, {special} FROM "{SLEIGHT_TABLE}" ORDER BY key').fetchall()
    return [SleightTrial(key=r[0], question_id=str(r[1]), question=r[2] or "", trigger=r[3] or "",
                         substitution=r[4] or "", reaction_text=r[5] or "", swap_count=int(r[6] or 0),
                         untouched=bool(r[7]), reaction_text_special=r[8]) for r in rows]


def replace_rows(store: RunStore, table: str, model: type[Record], records: Sequence[Record],
                 where: str = "", params: list | None = None) -> None:
    """Replace derived rows atomically (see :meth:`RunStore.replace`)."""
    store.replace(table, model, records, where, params)
