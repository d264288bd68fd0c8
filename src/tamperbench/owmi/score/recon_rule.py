"""The reconstruction scoring rule: a report is correct when it names the injected concept.

Why a rule at all: the OWMI paper scored no reconstruction probe, "because these interventions
carry no ground-truth concept label to score a reconstruction against" (Appendix D.3). Our engine
injects concept directions whose label it records (``OwmiRun.concept``; ``owmi/engine/conditions.py``),
so a reconstruction answer can be right or wrong. This module is the whole rule, in one place, so
a reader can audit it and a human-validated subset (D.3) can be compared against it.

The rule (deterministic, no model in the loop):

* Both the report and the label are reduced by :func:`concept_key`: Unicode NFKC, case-folded,
  every run of characters that are not letters or digits replaced by one space, stripped. So
  ``"Ocean"``, ``" OCEAN! "``, ``"ocean."`` and full-width ``"ＯＣＥＡＮ"`` all read ``"ocean"``.
* The report is correct iff its key *equals* the label's key. Whole-answer equality, not "the
  label occurs in the report": the probe asks for exactly one word from a closed list, and a
  containment rule would credit a hedge that lists every concept (``"ocean, fire, music"``), a
  word that merely contains the label (``"fireworks"`` for ``fire``) or a negation
  (``"not ocean"``). Accents are not folded (``"océan"`` is not ``"ocean"``): the closed list is
  ASCII and a different spelling is a different word.
* An empty key is no label: a pair whose intervention row records no concept has no ground truth
  and is not scored (``reconstruction.scored_view`` says how many pairs that drops and why).

The same rule scores every condition (the model under intervention, sham, random, and every
observer tier), so it cannot favour one side of a margin.
"""

from __future__ import annotations

import re
import unicodedata

_NON_WORD = re.compile(r"[\W_]+")
MAX_CHARS = 4096  # a report longer than this is cut before normalising (records are bounded; hostile input may not be)


def concept_key(text: object) -> str | None:
    """The normalised form of a concept label or report; ``None`` when nothing is left."""
    if text is None:
        return None
    s = unicodedata.normalize("NFKC", str(text)[:MAX_CHARS]).casefold()
    s = _NON_WORD.sub(" ", s).strip()
    return s or None


def names_concept(report: object, label: object) -> bool | None:
    """True when ``report`` names ``label`` under the rule above; ``None`` when there is no label
    (no ground truth: unscorable, never "wrong")."""
    want = concept_key(label)
    if want is None:
        return None
    return concept_key(report) == want


RULE = ("rule-scored: a reconstruction report is correct iff its normalised text (NFKC, case-folded, non-alphanumeric "
        "runs to one space) equals the normalised label of the concept injected in its pair's intervention run; every "
        "condition (intervention, sham, random, observer tiers) is scored against that same label")
PAPER = ("paper (Appendix D.3): reconstruction not scored, its interventions carry no ground-truth concept label; "
         "any reconstruction claim needs a human-validated subset scored by multiple raters")
