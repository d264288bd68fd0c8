"""Each benchmark's own scoring rule, dispatched on ``BenchItem.scoring`` (see :mod:`.score`)."""
