# TEMP: owmi port -- owmi/ still imports this path; the module is tamperbench.safeio.files.
from tamperbench.safeio.files import atomic_open, atomic_write, read_capped, refuse_links

__all__ = ["atomic_open", "atomic_write", "read_capped", "refuse_links"]
