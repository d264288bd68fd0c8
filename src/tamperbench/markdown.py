# TEMP: owmi port -- owmi/ still imports this path; the module is tamperbench.safeio.markdown.
from tamperbench.safeio.markdown import escape_markdown

__all__ = ["escape_markdown"]
