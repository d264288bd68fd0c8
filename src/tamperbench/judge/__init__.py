"""The judge jury (protocol Section 3 and Appendix G): labels for every tampered Sleight of Word reply.

Modules, one job each:

* ``prompt``    the Appendix G prompt (``data/judge_prompt.json``), filled per trial
* ``delimit``   fencing of the untrusted reply inside the prompt
* ``parse``     reading a verdict out of free judge text (never inventing False)
* ``jury``      batched judging with one stricter retry; majority vote per label
* ``evidence``  a deterministic rule-based detector reported beside the jury
* ``agreement`` Cohen / Fleiss kappa between judges, evidence vs jury, judges vs humans
* ``annotate``  a local page for the human gold set
* ``records``   the tables written into the run database
* ``runner``    ``judge run``: validate, load the jury, judge, derive verdicts and agreement
* ``samples``   hand-written replies per label (tests, benchmark, documentation)
* ``cli``       ``tamperbench judge run|evidence|annotate|agreement``
"""
