"""Anchor prompts (the pool lives in ``owmi.anchor_items``, where ``owmi run``'s ``anchor``
benchmark reads it too): re-exported for the anchors."""

from __future__ import annotations

from tamperbench.owmi.run.anchor_items import anchor_prompts

__all__ = ["anchor_prompts"]
