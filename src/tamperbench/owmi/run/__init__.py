"""A spec's life, read top-down in the order a run goes through it, one module per phase:

``spec`` (the spec, its presets and the items it runs) -> ``runner`` (``run``; every check before any
compute and the worker's context, before the plan) -> ``plan`` (record keys, the store's stored
units, the work units, the bar's bound) -> back in ``runner``, the worker (per unit: the engine
prepares, impact-matches and hands back the unit's records batch by batch) and the driver's
``SUITE``. ``context`` (what the steps share) and ``anchor_items`` (the probe anchor's items) are
read from there. The engine is reached through its package (``engine/__init__.py``: the checks and
the pick) and one module (``engine/base.py``: the interface); scoring through ``score/tables.py``
(the finishing rows, the summary).
"""
