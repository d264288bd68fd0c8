"""``python -m tamperbench.cli``: the same entry point as the ``tamperbench`` console script."""

from tamperbench.cli.root import main

main()
