"""Checking a mode or a config option value against what the agent offers, before it is sent.

Pure: the session passes in the lists the agent sent (any shape) and gets back what to send, or
an error naming what is offered. Nothing reaches the agent that it could only refuse.
"""

from __future__ import annotations

from typing import Any

from ..errors import CapabilityError, NotOfferedError


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
