"""The agent's questions (`elicitation/create`) as forms in the live turn view.

The view's page draws each pending question inside its card: inputs for a form's fields
(text, a text area for a long one, number, a checkbox, a choice, several choices) with Submit,
Decline and Cancel, or a link with its host shown and Accept or Decline. What the page sends
back is checked here against the form (`check_answer`), the one check: an answer that does not
fit stays pending with the reason shown next to its field, so nothing the user typed is lost.
Nobody answering within the view's `permission_timeout` declines, and the record says why.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

import anyio

from ..client.serving.elicit import Answer
from ..display.views import text
from ..errors import ElicitationError
from ..protocol.elicitation import ElicitationPart, check_answer


class PendingForms:
    """The questions waiting in one turn's view, and how the page's answers reach them."""

    def __init__(self, changed: Callable[[], None], mask: Callable[[str], str]) -> None:
        self.changed = changed  # the view redraws: the page learns of new or answered forms
        self.mask = mask
        self.timeout = 0.0
        self._forms: dict[str, dict[str, Any]] = {}
        self._parts: dict[str, ElicitationPart] = {}
        self._answers: dict[str, asyncio.Future[Answer]] = {}

    def __bool__(self) -> bool:
        return bool(self._forms)

    def for_page(self) -> list[dict[str, Any]]:
        return list(self._forms.values())

    async def ask(self, part: ElicitationPart) -> Answer:
        """The `elicitation_handler` of the view's turn."""
        pid = part.part_id
        self._parts[pid] = part
        self._forms[pid] = self._form(part)
        self._answers[pid] = asyncio.get_running_loop().create_future()
        self.changed()
        try:
            with anyio.move_on_after(self.timeout or math.inf):
                return await self._answers[pid]
            raise TimeoutError(f"no answer within {self.timeout:g} s")
        finally:
            for table in (self._forms, self._parts, self._answers):
                table.pop(pid, None)
            self.changed()

    def answered(self, content: dict[str, Any]) -> None:
        """What the page sent for one form: `{"id", "action", "values"}`."""
        pid = str(content.get("id"))
        future, part = self._answers.get(pid), self._parts.get(pid)
        action = content.get("action")
        if future is None or part is None or future.done():
            return
        if action in ("decline", "cancel"):
            future.set_result(str(action))
        elif action == "accept" and part.mode == "url":
            future.set_result("accept")
        elif action == "accept":
            try:
                future.set_result(check_answer(part, content.get("values")))
            except ElicitationError as exc:  # shown by its field; the typed values stay
                # Numbered: the same mistake made twice is a new answer to the page, which
                # waits for it to let the form be sent again.
                tries = self._forms[pid]["tries"] + 1
                error = {"error": text(str(exc), 300), "errorField": exc.field, "tries": tries}
                self._forms[pid] = {**self._forms[pid], **error}
                self.changed()

    def _form(self, part: ElicitationPart) -> dict[str, Any]:
        mask = self.mask
        fields = [
            {
                "name": f.name,
                "type": f.type,
                "title": mask(text(f.title or f.name, 200)),
                "description": mask(text(f.description, 500)),
                "required": f.required,
                "default": f.default if not isinstance(f.default, str) else mask(f.default),
                "choices": [[v, mask(text(label, 200))] for v, label in f.choices],
                "min": f.minimum,
                "max": f.maximum,
                "multiline": f.multiline,
            }
            for f in part.fields
        ]
        # The link as the browser will open it and the host it opens (`weburl`), never the
        # agent's spelling: a refused link is declined before it gets here, and has neither.
        link = part.link
        return {
            "id": part.part_id,
            "mode": part.mode,
            "fields": fields,
            "url": mask(link.href),
            "host": mask(link.host),
            "unicodeHost": mask(link.unicode_host),
            "error": "",
            "errorField": "",  # the field the error is about, "" for the whole form
            "tries": 0,  # answers refused so far
        }
