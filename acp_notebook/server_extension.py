"""The package's Jupyter Server extension: compressed kernel websockets.

A turn's live view in the page sends a few dozen small messages a second while an answer
streams, each mostly the same Jupyter envelope (header, parent header, ids: about 0.5 KB). With
permessage-deflate on the websocket those repeated bytes cost a few each, so a streaming turn
costs the page about its transcript on the wire, not several times it (docs/live-view.md).
Jupyter Server compresses nothing unless `ServerApp.websocket_compression_options` is set; this
turns it on with tornado's defaults, unless the server's configuration sets it (to `None`, say,
to keep compression off).

Enabled by `jupyter-config/jupyter_server_config.d/acp_notebook.json`, installed with the package.
"""

from __future__ import annotations

from typing import Any

SETTING = "websocket_compression_options"


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Called by Jupyter Server once its web application exists, before it serves."""
    if SETTING in serverapp.config.get("ServerApp", {}):
        return  # the server's own configuration decides
    serverapp.web_app.settings[SETTING] = {}
    serverapp.log.info("acp_notebook: kernel websockets are compressed (permessage-deflate)")
