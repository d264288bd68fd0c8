"""What every OWMI layer reads: the design's terms (``design``: objects, operators and their doses, frames),
the stored record's shape (``records``) and the probe battery (``probes``, ``probe_schema``)."""
