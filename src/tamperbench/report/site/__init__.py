"""The static report site: leaderboards per suite, run provenance pages, figures and trial viewers.

Entry point: :func:`build_site`. Suites contribute through the ``site`` part of their registry entry.
"""

from tamperbench.report.site.builder import build_site

__all__ = ["build_site"]
