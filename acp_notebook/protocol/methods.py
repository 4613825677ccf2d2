"""ACP wire method names, taken from the tables of the SDK we already depend on for the schema.

One name per constant, so a method renamed upstream is a failed import here, not a silent
string that no longer matches. `CANCEL_REQUEST` is JSON-RPC's `$/cancel_request`, which the
SDK's tables do not list because it is not an ACP method.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Final


def _sdk_tables() -> tuple[dict[str, str], dict[str, str]]:
    """The SDK's `acp/meta.py` tables, loaded without running `acp/__init__`.

    `import acp.meta` would import the whole SDK first (about 2 s of CPU for its schema), on
    the thread that imports the client; `meta.py` itself is two literal dicts.
    """
    spec = importlib.util.find_spec("acp")  # finds the package; does not execute it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the agent-client-protocol package (acp) is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "meta.py"
    meta_spec = importlib.util.spec_from_file_location("acp_notebook._acp_meta", path)
    if meta_spec is None or meta_spec.loader is None:
        raise ImportError(f"cannot load the ACP method tables from {path}")
    meta = importlib.util.module_from_spec(meta_spec)
    meta_spec.loader.exec_module(meta)
    return dict(meta.AGENT_METHODS), dict(meta.CLIENT_METHODS)


AGENT_METHODS, CLIENT_METHODS = _sdk_tables()

# Requests and notifications the client sends to the agent.
INITIALIZE: Final = AGENT_METHODS["initialize"]
AUTHENTICATE: Final = AGENT_METHODS["authenticate"]
LOGOUT: Final = AGENT_METHODS["logout"]
SESSION_NEW: Final = AGENT_METHODS["session_new"]
SESSION_LOAD: Final = AGENT_METHODS["session_load"]
SESSION_RESUME: Final = AGENT_METHODS["session_resume"]
SESSION_LIST: Final = AGENT_METHODS["session_list"]
SESSION_CLOSE: Final = AGENT_METHODS["session_close"]
SESSION_DELETE: Final = AGENT_METHODS["session_delete"]
#: Unstable (`sessionCapabilities.fork`): a new session from an existing one's conversation.
SESSION_FORK: Final = AGENT_METHODS["session_fork"]
SESSION_PROMPT: Final = AGENT_METHODS["session_prompt"]
SESSION_CANCEL: Final = AGENT_METHODS["session_cancel"]
SESSION_SET_MODE: Final = AGENT_METHODS["session_set_mode"]
SESSION_SET_CONFIG_OPTION: Final = AGENT_METHODS["session_set_config_option"]

# Requests and notifications the agent sends to the client.
SESSION_UPDATE: Final = CLIENT_METHODS["session_update"]
REQUEST_PERMISSION: Final = CLIENT_METHODS["session_request_permission"]
FS_READ_TEXT_FILE: Final = CLIENT_METHODS["fs_read_text_file"]
FS_WRITE_TEXT_FILE: Final = CLIENT_METHODS["fs_write_text_file"]
TERMINAL_CREATE: Final = CLIENT_METHODS["terminal_create"]
TERMINAL_OUTPUT: Final = CLIENT_METHODS["terminal_output"]
TERMINAL_RELEASE: Final = CLIENT_METHODS["terminal_release"]
TERMINAL_WAIT_FOR_EXIT: Final = CLIENT_METHODS["terminal_wait_for_exit"]
TERMINAL_KILL: Final = CLIENT_METHODS["terminal_kill"]
ELICITATION_CREATE: Final = CLIENT_METHODS["elicitation_create"]

# JSON-RPC's own cancellation notification (either direction).
CANCEL_REQUEST: Final = "$/cancel_request"

#: The terminal methods, which the client serves only when it advertised `terminal: true`.
TERMINAL_METHODS: Final = frozenset(
    {TERMINAL_CREATE, TERMINAL_OUTPUT, TERMINAL_RELEASE, TERMINAL_WAIT_FOR_EXIT, TERMINAL_KILL}
)
