"""The server extension turns on compressed kernel websockets unless the server's configuration
decides (the wire itself: tests/browser/test_lab_traffic.py)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from traitlets.config import Config

import acp_notebook
from acp_notebook import server_extension

CONFIG = Path(__file__).parents[2] / "jupyter-config/jupyter_server_config.d/acp_notebook.json"


def _server(config: Config) -> Any:
    web_app = SimpleNamespace(settings={"websocket_compression_options": None})
    return SimpleNamespace(config=config, web_app=web_app, log=logging.getLogger("test"))


def test_compression_is_turned_on_by_default() -> None:
    server = _server(Config())
    server_extension._load_jupyter_server_extension(server)
    assert server.web_app.settings["websocket_compression_options"] == {}


def test_the_servers_configuration_wins_even_none() -> None:
    config = Config()
    config.ServerApp.websocket_compression_options = None
    server = _server(config)
    server_extension._load_jupyter_server_extension(server)
    assert server.web_app.settings["websocket_compression_options"] is None


def test_the_installed_config_enables_the_packages_extension() -> None:
    enabled = json.loads(CONFIG.read_text())["ServerApp"]["jpserver_extensions"]
    assert enabled == {"acp_notebook": True}
    points = acp_notebook._jupyter_server_extension_points()
    assert points == [{"module": "acp_notebook.server_extension"}]
