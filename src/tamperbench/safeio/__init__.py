"""Writing untrusted text and files safely: every file, CSV cell and Markdown line tamperbench writes.

* ``files``      atomic writes that never follow a symbolic link; run directories checked for links
* ``csv_cells``  spreadsheet-safe CSV cells (formula injection defused)
* ``markdown``   untrusted text made inert in Markdown, and the report's small Markdown-to-HTML step
"""
