"""Exact Words: does a model copy one sentence verbatim, planted errors and all?

Modules: ``items`` (documents, items, presets, arms), ``sentences`` (the sentence-boundary
convention), ``normalise`` + ``scorer`` (deterministic verdicts with evidence), ``runner``
(generate, score, store), ``tables`` (summaries), ``score_file`` and ``cli``.
"""
