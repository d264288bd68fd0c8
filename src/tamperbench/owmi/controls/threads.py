"""Torch intra-op threads for the anchors' many small forward passes, sized to the idle cores.

Why: on a 2-core machine shared with other jobs (load average ~16), torch's default of 2
intra-op threads made one 40-token forward of the embedded model take 10-15 s, against 0.9 s with
one thread (measured 2026-11-30, ``benchmarks``-style loop over ``backend.capture``): spinning
worker threads starve each other when the cores are oversubscribed. We use as many threads as
there are idle cores (at least one, at most torch's default) and restore the setting afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def idle_core_threads() -> Iterator[int]:
    import torch

    before = torch.get_num_threads()
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    n = max(1, min(before, int((os.cpu_count() or 1) - load + 0.5)))
    torch.set_num_threads(n)
    try:
        yield n
    finally:
        torch.set_num_threads(before)
