"""User-facing errors.

Anything the user can fix (a bad path, a misspelled spec field, a negative batch size) is
raised as :class:`UserError`. The CLI turns it into one line on stderr and exit status 2,
never a traceback. Internal bugs keep their tracebacks.
"""


class UserError(Exception):
    """A problem with the user's input; the message names the culprit (field, file, id)."""

    exit_code = 2
