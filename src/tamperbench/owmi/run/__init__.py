"""A spec's life: spec and presets, items, record keys and plan, validation, the runner."""
