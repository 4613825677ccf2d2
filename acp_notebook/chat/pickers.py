"""The chat's mode and model pickers: the session's modes and select config options as menus.

`pickers` (pure) says which menus the session offers now: none when the agent offers no modes and
no config options, so nothing is shown. `ChatPickers` keeps one dropdown per menu in step with the
session (`current_mode_update` and `config_option_update` redraw it) and sends a choice to the
agent (`session/set_mode`, `session/set_config_option`); a refusal is reported, and the menu goes
back to what the session says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ipywidgets as w

from ..client.session import Session
from ..display.views import text
from ..widgets.loop import KernelLoop

MODE = "mode"
MAX_CHOICES = 200


@dataclass(frozen=True)
class Picker:
    """One menu: `key` is "mode" or "config:<option id>"; `choices` are (label, value)."""

    key: str
    label: str
    choices: tuple[tuple[str, str], ...]
    value: str


def pickers(modes: list[Any], mode: str | None, config_options: list[Any]) -> list[Picker]:
    """The menus for these modes and config options (only `select` options; a boolean one has
    no menu), every string from the agent cut short; a menu with no choice is left out."""
    out: list[Picker] = []
    choices = _pairs(modes, "id")
    if choices:
        out.append(Picker(MODE, "Mode", choices, _current(choices, mode)))
    for option in config_options:
        if not isinstance(option, dict):
            continue
        if option.get("type", "select") != "select" or not isinstance(option.get("id"), str):
            continue
        choices = _pairs(_flat(option.get("options")), "value")
        if choices:
            label = text(option.get("name") or option["id"], 40)
            current = _current(choices, option.get("currentValue"))
            out.append(Picker(f"config:{option['id']}", label, choices, current))
    return out


def _flat(options: Any) -> list[dict[str, Any]]:
    """A select's choices, its groups (`{"group", "name", "options"}`) flattened."""
    out: list[dict[str, Any]] = []
    for item in options if isinstance(options, list) else []:
        if isinstance(item, dict) and isinstance(item.get("options"), list):
            out += [c for c in item["options"] if isinstance(c, dict)]
        elif isinstance(item, dict):
            out.append(item)
    return out


def _pairs(items: list[Any], key: str) -> tuple[tuple[str, str], ...]:
    pairs: dict[str, str] = {}
    for item in items[:MAX_CHOICES]:
        value = item.get(key) if isinstance(item, dict) else None
        if isinstance(value, str) and value and value not in pairs:
            pairs[value] = text(item.get("name") or value, 60)
    return tuple((label, value) for value, label in pairs.items())


def _current(choices: tuple[tuple[str, str], ...], value: Any) -> str:
    values = [v for _, v in choices]
    return value if isinstance(value, str) and value in values else values[0]


class ChatPickers:
    """The menus as ipywidgets dropdowns in `box` (hidden when there is none). A choice made in
    the page is sent from the kernel's loop (`KernelLoop`); `report(message)` shows a failure."""

    def __init__(
        self,
        session: Session,
        kernel: KernelLoop,
        report: Callable[[str], None],
        mask: Callable[[str], str] = str,
    ) -> None:
        self.session = session
        self.kernel = kernel
        self.report = report
        self.mask = mask
        self.box = w.HBox(layout=w.Layout(flex_flow="row wrap"))
        self.box.add_class("acpnb-chat-pickers")
        self.menus: dict[str, w.Dropdown] = {}
        self.specs: dict[str, Picker] = {}
        self._quiet = False  # set while the kernel, not the reader, changes a menu
        self.refresh()

    def refresh(self) -> None:
        """Redraw the menus from the session's current modes and config options."""
        specs = pickers(self.session.modes, self.session.mode, self.session.config_options)
        self.specs = {p.key: p for p in specs}
        self._quiet = True
        try:
            for spec in specs:
                menu = self.menus.get(spec.key) or self._menu(spec)
                choices = tuple((self.mask(label), value) for label, value in spec.choices)
                if tuple(menu.options) != choices:
                    menu.options = choices
                menu.value = spec.value
                menu.description = self.mask(spec.label)
        finally:
            self._quiet = False
        self.box.children = tuple(self.menus[p.key] for p in specs)
        self.box.layout.display = "flex" if specs else "none"

    def _menu(self, spec: Picker) -> w.Dropdown:
        menu = w.Dropdown(layout=w.Layout(width="auto"), style={"description_width": "initial"})
        menu.add_class("acpnb-chat-picker")
        menu.add_class(f"acpnb-chat-picker-{'mode' if spec.key == MODE else 'config'}")
        menu.observe(lambda change: self._picked(spec.key, change["new"]), names="value")
        self.menus[spec.key] = menu
        return menu

    def _picked(self, key: str, value: Any) -> None:
        # Runs where the page's message arrives (a subshell's thread): the work goes to the loop.
        if self._quiet or not isinstance(value, str):
            return
        self.kernel.spawn(lambda: self.choose(key, value))

    async def choose(self, key: str, value: str) -> None:
        """Send a choice to the agent; a refusal is reported and the menu shows the session."""
        spec = self.specs.get(key)
        if spec is None or value == spec.value:
            return
        try:
            if key == MODE:
                await self.session.set_mode(value)
            else:
                await self.session.set_config_option(key.removeprefix("config:"), value)
        except Exception as exc:
            self.report(f"Could not set {spec.label.lower()} to {value!r}: {exc}")
        finally:
            self.refresh()

    def close(self) -> None:
        for menu in self.menus.values():
            menu.close()
        self.box.close()
