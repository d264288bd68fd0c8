"""A spec's life, read top-down in the order a run goes through it:

``spec`` (the spec and its presets) -> ``runner`` (``run`` and the driver's ``SUITE``) -> ``validate``
(every check before any compute, and the worker's context) -> ``plan`` (record keys, the store's
stored units, the work units, the bar's bound) -> ``execute`` (per unit: the engine's phases, then
its records batch by batch) -> ``record`` (one stored record). ``items`` (the items a spec runs),
``context`` (what the steps share) and ``anchor_items`` (the probe anchor's items) are read from there.
"""
