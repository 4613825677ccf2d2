"""How turn results, handles, sessions and clients show up when displayed (`Out[n]`,
`display(result)`): masked like every other output (their reprs quote the agent's text).

Registered when the extension loads, in every kernel, so nothing heavy is imported here: the
client's classes are named (IPython's deferred printers, looked up by module and class name
when such an object is first shown) and the renderer is imported when a result is drawn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol.redact import Redactor
from ..protocol.turn import TurnResult

if TYPE_CHECKING:
    from ..client.turn import TurnHandle

#: The client's classes shown by name: (module, class). tests/kernel/test_light_load.py checks
#: each names the class it means.
HANDLE = ("acp_notebook.client.turn", "TurnHandle")
MASKED_REPRS = (
    ("acp_notebook.client.session", "Session"),
    ("acp_notebook.client.client", "Client"),
)

#: The result whose record a live turn view left in its own output (see `shown_in_place`).
_IN_PLACE: list[TurnResult] = []
#: The metadata key that marks the cell value's empty bundle when the record is already in the
#: cell: the kernel's displayhook drops that `execute_result` (`drop_in_place`), so the saved
#: notebook has no empty output after the record (147 B, and an empty `Out[n]` in the page).
IN_PLACE_KEY = "acp_notebook_in_place"


def shown_in_place(result: TurnResult) -> None:
    """The record of `result` is already in the cell (a turn view became it): the next display
    of `result`, the cell's value, adds no second copy (`_` and `Out` still hold it)."""
    _IN_PLACE[:] = [result]


def forget_in_place(*_: Any) -> None:
    """After each cell: a result marked in place that was not the cell's value (the magic run
    from code, `run_cell_magic`) is not left to blank a later display of it."""
    _IN_PLACE.clear()


def drop_in_place(msg: dict[str, Any]) -> dict[str, Any] | None:
    """An ipykernel displayhook hook: no `execute_result` for a value whose record is in place
    (None suppresses the send; `_` and `Out` are set before, so they still hold the value)."""
    content = msg.get("content")
    metadata = content.get("metadata") if isinstance(content, dict) else None
    if isinstance(metadata, dict) and metadata.get(IN_PLACE_KEY):
        return None
    return msg


def unregister(ipython: Any) -> None:
    """Undo `register`'s hooks (the extension is unloaded)."""
    if forget_in_place in ipython.events.callbacks["post_run_cell"]:
        ipython.events.unregister("post_run_cell", forget_in_place)
    unhook = getattr(ipython.displayhook, "unregister_hook", None)
    if unhook is not None:
        unhook(drop_in_place)


def register(ipython: Any, redactor: Redactor) -> None:
    def result_bundle(
        result: TurnResult, *_: Any, **__: Any
    ) -> dict[str, Any] | tuple[dict[str, Any], dict[str, Any]]:
        # Only the cell's value is blanked (ipykernel's displayhook has its message while it
        # writes one; before its first, no `msg` at all); a `display(result)` of the user's
        # shows the record each time. Another displayhook: every display, as before.
        shown = ipython.displayhook
        in_value = not hasattr(shown, "register_hook") or getattr(shown, "msg", None) is not None
        if in_value and _IN_PLACE and _IN_PLACE[0] is result:
            _IN_PLACE.clear()
            # Marked for `drop_in_place`; where the hook is missing (another shell, a subshell's
            # thread) this empty text is all that shows.
            return {"text/plain": ""}, {IN_PLACE_KEY: True}
        from .publish import turn  # the renderer: imported when a result is first drawn

        return turn(result.to_json(), redactor=redactor)

    def handle_bundle(
        turn: TurnHandle, *_: Any, **__: Any
    ) -> dict[str, Any] | tuple[dict[str, Any], dict[str, Any]]:
        if turn.result is not None:
            return result_bundle(turn.result)
        return {
            "text/plain": f"<TurnHandle {turn.id}: running in the background; "
            "`await h.finished` gives its result>"
        }

    def masked_repr(obj: Any, printer: Any, cycle: bool) -> None:
        printer.text(redactor.text(repr(obj)))

    if forget_in_place not in ipython.events.callbacks["post_run_cell"]:
        ipython.events.register("post_run_cell", forget_in_place)
    hook = getattr(ipython.displayhook, "register_hook", None)  # ipykernel's, from 7.x
    if hook is not None:
        ipython.displayhook.unregister_hook(drop_in_place)  # once, after a %reload_ext too
        hook(drop_in_place)
    formatter = ipython.display_formatter.mimebundle_formatter
    formatter.for_type(TurnResult, result_bundle)
    formatter.for_type_by_name(*HANDLE, handle_bundle)
    # Results and handles have their text/plain in the bundle above (a text/plain formatter
    # registered for them would win over it).
    plain = ipython.display_formatter.formatters["text/plain"]
    for module, name in MASKED_REPRS:
        plain.for_type_by_name(module, name, masked_repr)
