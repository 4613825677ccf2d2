"""What a session knows outside any turn: its modes, config options, commands, info and usage;
and a mode or option value checked against what it offers (`check_mode`, `config_change`).

The fold owns one `SessionFacts` and hands it the ambient updates (`current_mode_update`,
`config_option_update`, `available_commands_update`, `session_info_update`, `usage_update`) and
the state that `session/new`, `load` and `resume` return. Each list is a whole snapshot, bounded
by the fold's `Limits`; in `session_info_update` an omitted field is unchanged and `null` clears
it; usage is cumulative, and numbers that are no real usage are refused (the caller keeps the
update as a raw part with the reason).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import CapabilityError, NotOfferedError
from . import schema
from .coerce import text
from .limits import MAX_INT, Limits, bounded
from .state import Usage

_MAX_COST = 1e15  # a cumulative cost beyond this is no real amount of any currency
_MAX_CURRENCY = 32


class SessionFacts:
    """The session-wide state; `changed(name)` is called after each change (`mode`,
    `config_options`, `commands`, `info`, `usage`)."""

    def __init__(self, limits: Limits, changed: Callable[[str], None]) -> None:
        self.limits = limits
        self.changed = changed
        self.current_mode_id: str | None = None
        self.modes: list[dict[str, Any]] = []
        self.config_options: list[dict[str, Any]] = []
        self.commands: list[dict[str, Any]] = []
        self.info: dict[str, Any] = {}  # title, updatedAt, _meta as last patched
        self.usage: Usage | None = None

    # -- updates (each raises schema.ValidationError on a malformed one) -----------------------

    def commands_update(self, update: dict[str, Any]) -> None:
        model = schema.validate_update(cut_list(update, "availableCommands", self.limits))
        self.commands = self._session_list([schema.dump(c) for c in model.available_commands])
        self.changed("commands")

    def mode_update(self, update: dict[str, Any]) -> None:
        if "currentModeId" not in update and isinstance(update.get("modeId"), str):
            # The docs' example says modeId; the schema says currentModeId. Accept both.
            update = {**update, "currentModeId": update["modeId"]}
        model = schema.validate_update(update)
        self.current_mode_id = model.current_mode_id
        self.changed("mode")

    def config_update(self, update: dict[str, Any]) -> None:
        model = schema.validate_update(cut_list(update, "configOptions", self.limits))
        self.config_options = self._session_list([schema.dump(o) for o in model.config_options])
        self.changed("config_options")

    def info_update(self, update: dict[str, Any]) -> None:
        schema.validate_update(update)
        for key in ("title", "updatedAt", "_meta"):
            if key in update:
                if update[key] is None:
                    self.info.pop(key, None)
                else:
                    self.info[key] = bounded(update[key], self.limits.value_chars)[0]
        self.changed("info")

    def usage_update(self, update: dict[str, Any]) -> str | None:
        """Keep the usage; or return why its numbers are no real usage (nothing kept)."""
        model = schema.validate_update(update)
        cost = model.cost
        problem = usage_problem(model.used, model.size, cost)
        if problem is not None:
            return problem
        currency = cost.currency if cost is not None else None
        self.usage = Usage(
            model.used,
            model.size,
            float(cost.amount) if cost is not None else None,
            currency[:_MAX_CURRENCY] if isinstance(currency, str) else None,
        )
        self.changed("usage")
        return None

    # -- from responses ------------------------------------------------------------------------

    def set_modes(self, modes: Any) -> None:
        """From a session/new, load or resume response (`modes` is optional legacy state)."""
        if isinstance(modes, dict):
            available = modes.get("availableModes")
            self.modes = self._session_list(available if isinstance(available, list) else [])
            current = modes.get("currentModeId")
            if isinstance(current, str):
                self.current_mode_id = current[: self.limits.value_chars]
            self.changed("mode")

    def set_mode(self, mode_id: str) -> None:
        """The agent accepted `session/set_mode`."""
        self.current_mode_id = mode_id[: self.limits.value_chars]
        self.changed("mode")

    def set_config_options(self, options: Any) -> None:
        if isinstance(options, list):
            self.config_options = self._session_list(options)
            self.changed("config_options")

    def _session_list(self, items: list[Any]) -> list[dict[str, Any]]:
        """A session-wide list (commands, config options, modes) within the limits."""
        kept = [i for i in items[: self.limits.list_items] if isinstance(i, dict)]
        value, _ = bounded(kept, self.limits.value_chars)
        return value  # type: ignore[no-any-return]


def cut_list(update: dict[str, Any], key: str, limits: Limits) -> dict[str, Any]:
    """`update` with its list `key` cut to the limit before validation (which costs per item)."""
    items = update.get(key)
    if type(items) is list and len(items) > limits.list_items:
        return {**update, key: items[: limits.list_items]}
    return update


def usage_problem(used: Any, size: Any, cost: Any) -> str | None:
    """Why a usage update's numbers are not a real usage, or None (then they are kept)."""
    for name, value in (("used", used), ("size", size)):
        if type(value) is not int or not 0 <= value <= MAX_INT:
            return f"invalid {name}: {value!r} is not a token count (0 to 2^63-1)"
    if cost is not None:
        amount = cost.amount
        if type(amount) not in (int, float) or not 0 <= amount <= _MAX_COST or amount != amount:
            return f"invalid cost.amount: {amount!r} is not an amount (0 to {_MAX_COST:g})"
    return None


# -- a mode or a config option value checked against what the agent offers, before it is sent.
# The session passes in the lists the agent sent (any shape) and gets back what to send, or an
# error naming what is offered: nothing reaches the agent that it could only refuse.


def check_mode(modes: list[dict[str, Any]], current: str | None, mode_id: str) -> None:
    """Raise unless `mode_id` is one of `modes` (or the agent lists none but has a mode)."""
    if not modes and not current:
        raise CapabilityError("the agent offers no session modes")
    known = {m.get("id") for m in modes}
    if known and mode_id not in known:
        raise NotOfferedError(
            f"unknown mode {mode_id!r}; the agent offers: "
            f"{', '.join(sorted(str(k) for k in known))}"
        )


def config_change(
    options: list[dict[str, Any]], config_id: str, value: str | bool
) -> dict[str, Any]:
    """The `session/set_config_option` params (without the session id) for a valid change."""
    option = next((o for o in options if o.get("id") == config_id), None)
    if option is None:
        offered = ", ".join(str(o.get("id")) for o in options) or "none"
        raise NotOfferedError(f"unknown config option {config_id!r}; the agent offers: {offered}")
    params: dict[str, Any] = {"configId": config_id, "value": value}
    if option.get("type") == "boolean":
        if not isinstance(value, bool):
            raise NotOfferedError(f"config option {config_id!r} takes true or false")
        params["type"] = "boolean"
    elif isinstance(value, bool):
        # A bool for a select option used to be sent as a boolean change, which the agent can
        # only refuse: a bad value is an error before anything is sent.
        raise NotOfferedError(f"config option {config_id!r} takes one of its values, not {value!r}")
    else:
        allowed = select_values(option)
        if allowed and value not in allowed:
            raise NotOfferedError(
                f"{value!r} is not a value of {config_id!r}; choose from: "
                f"{', '.join(sorted(allowed))}"
            )
    return params


def select_values(option: dict[str, Any]) -> set[str]:
    """The values a select option offers, flat or in groups."""
    values: set[str] = set()
    for item in option.get("options") or []:
        if isinstance(item, dict) and "value" in item:
            values.add(str(item["value"]))
        elif isinstance(item, dict):  # a group
            values.update(
                str(o.get("value")) for o in item.get("options") or [] if isinstance(o, dict)
            )
    return values


def session_model(config_options: list[dict[str, Any]]) -> str | None:
    """The session's model, as the agent names it (its `model` config option), on one line,
    bounded, or None."""
    for option in config_options:
        if option.get("category") != "model" and option.get("id") != "model":
            continue
        value = option.get("currentValue")
        for choice in _choices(option.get("options")):
            if choice.get("value") == value:
                return _line(choice.get("name") or value)
        return _line(value)
    return None


def _choices(options: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in options if isinstance(options, list) else []:
        if isinstance(item, dict) and isinstance(item.get("options"), list):  # a group
            out += [c for c in item["options"] if isinstance(c, dict)]
        elif isinstance(item, dict):
            out.append(item)
    return out


def _line(value: Any) -> str | None:
    return " ".join(text(value).split())[:80] or None
