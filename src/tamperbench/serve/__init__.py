"""An OpenAI-compatible server over a local backend (``tamperbench serve``)."""
