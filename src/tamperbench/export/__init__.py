"""Run tables out of tamperbench, in other tools' formats (``tamperbench export``).

* ``tables``  the record tables of a run as Parquet, CSV (spreadsheet-safe cells) or JSON Lines
* ``hf``      a Hugging Face dataset folder: the tables as Parquet plus a dataset card

The inspect-ai log (``--format inspect``) is written by :mod:`tamperbench.inspect_ext.export`: it maps
records to inspect-ai samples and scores, so it lives with the rest of the inspect-ai integration.
"""
