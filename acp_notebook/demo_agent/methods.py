"""The ACP method names the demo agent serves and calls.

The package's own `acp_notebook.protocol.methods` takes these from the ACP SDK's tables, but
importing the SDK costs seconds and the demo agent must start in tens of milliseconds, so it
spells them out here; `tests/unit/test_layers.py` checks that each equals its namesake there.
"""

from __future__ import annotations

from typing import Final

# Requests and notifications the client sends to the agent.
INITIALIZE: Final = "initialize"
SESSION_NEW: Final = "session/new"
SESSION_LOAD: Final = "session/load"
SESSION_RESUME: Final = "session/resume"
SESSION_LIST: Final = "session/list"
SESSION_CLOSE: Final = "session/close"
SESSION_FORK: Final = "session/fork"
SESSION_PROMPT: Final = "session/prompt"
SESSION_CANCEL: Final = "session/cancel"
SESSION_SET_MODE: Final = "session/set_mode"
SESSION_SET_CONFIG_OPTION: Final = "session/set_config_option"

# Requests and notifications the agent sends to the client.
SESSION_UPDATE: Final = "session/update"
REQUEST_PERMISSION: Final = "session/request_permission"
FS_READ_TEXT_FILE: Final = "fs/read_text_file"
FS_WRITE_TEXT_FILE: Final = "fs/write_text_file"
TERMINAL_CREATE: Final = "terminal/create"
TERMINAL_OUTPUT: Final = "terminal/output"
TERMINAL_RELEASE: Final = "terminal/release"
TERMINAL_WAIT_FOR_EXIT: Final = "terminal/wait_for_exit"

# JSON-RPC's own cancellation notification.
CANCEL_REQUEST: Final = "$/cancel_request"
