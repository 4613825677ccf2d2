"""The kernel's one redactor and the filter that masks the extension's log records.

Apart from `publish.py` (which re-exports both) so that loading the extension can mask the log
from the start without importing the renderers: the redactor needs only `protocol.redact`.
There is one redactor per kernel process: the secrets are the process's environment, read anew
at every call (a cell may have run `load_dotenv()`), plus each configured agent's `env` and
secret command-line options (`Runtime.remember`).
"""

from __future__ import annotations

import logging
import os

from ..protocol.redact import Redactor

REDACTOR = Redactor(environ=os.environ)


class LogMask(logging.Filter):
    """Masks the extension's log records: they quote the agent's output (protocol errors,
    exceptions) and land in the cell's stderr, so in the saved notebook."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit the format: the handler would quote both
            message = f"{record.msg} {record.args!r}"
        record.msg = REDACTOR.text(message)
        record.args = None
        if record.exc_info:
            record.exc_text = REDACTOR.text(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        if record.stack_info:
            record.stack_info = REDACTOR.text(record.stack_info)
        return True


def install_log_mask() -> None:
    logger = logging.getLogger("acp_notebook")
    if not any(isinstance(f, LogMask) for f in logger.filters):
        logger.addFilter(LogMask())
