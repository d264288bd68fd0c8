"""tamperbench: does a language model notice tampering with its own words or computation?

Three suites share one foundation (model sources, a transformers backend with our own
step decoder, a DuckDB run store and a typer CLI):

* ``sleight`` -- Sleight of Word: swap a trigger word in the model's own output mid-generation.
* ``quote``   -- Exact Words: copy one sentence verbatim from a document with planted errors.
* ``owmi``    -- Open-Weight Masked Introspection (later wave).
"""

__version__ = "0.1.0"
