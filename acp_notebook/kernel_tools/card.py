"""`run_code` as the person sees it: the client's own card, its permission, the wait, the result.

Running code is a tool call of the client's own in the session: a card of kind `execute` in the
running turn (the code, then what it printed), and a permission request through the same policy
and buttons as the agent's own (`Session.client_call`, `Session.ask_for`): headless it is
rejected unless `--allow execute`, and `--deny execute` rejects it. The agent cannot change that
card (the fold refuses its updates for it), and the code must be one the card shows whole and in
the order it runs (`unshowable`): the person is asked about exactly what runs. The run itself,
bounded and stoppable, is `run.py`'s.
"""

from __future__ import annotations

import ast
import contextlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from unicodedata import category

import anyio

from ..protocol import limits
from ..render import clip as card_clip
from .run import run_code
from .variables import ToolOutput

if TYPE_CHECKING:
    from ..client.session import Session
    from ..client.turn import TurnHandle
    from .run import CellGate

#: Characters of code run_code takes: what its card shows whole (render/clip.py's head of a
#: text, which is also at most `TEXT_LINES` lines), less its fence.
MAX_CODE = limits.MAX_CHARS - 100
#: Characters that show code otherwise than it runs: controls (but tab and line ends), format
#: characters (bidirectional controls reorder the text around them, zero-width ones hide in a
#: string or a name) and Unicode's line separators (a line end to the page, not to Python).
_UNSEEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})
#: And letters and marks that draw nothing, which their category does not tell: Unicode's
#: default-ignorable code points that are not format characters (Hangul fillers, variation
#: selectors, the combining grapheme joiner...) and the blank Braille pattern. `'admin\u3164'`
#: showed as `'admin'` as U+200B did.
_BLANK = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2800\u3164\ufe00-\ufe0f\uffa0"
    "\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
GATE_TIMEOUT = 300.0  # seconds run_code waits for a user's cell to end
OPTIONS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]


async def run_asked(
    session: Session, gate: CellGate, ns: dict[str, Any], mask: Callable[[str], str], code: str
) -> ToolOutput:
    """Ask (card + permission), wait for the kernel to be free of the user's cells, run, show.

    The card is the client's own (`Session.client_call`): the agent cannot change it, so what
    the person is asked about is `code`, which is what runs, never read back from the card. The
    code runs only for the turn that asked, while it runs: a turn that ended meanwhile (its
    Stop, the cell's interrupt) or whose --timeout passed gets a refusal. It is stopped by the
    kernel's interrupt, which also cancels the turn, and by the turn's deadline."""
    refused = unshowable(code)
    if refused is not None:
        return ToolOutput(refused, error=True)
    turn = session.running
    code_block = fenced(code, "python")
    call = session.client_call("execute", title("Run code in the kernel", code), [code_block])
    if call is None:
        return ToolOutput(
            "the turn is past its size limits: the code could not be shown, so it was not run",
            error=True,
        )
    answer = await session.ask_for(call, OPTIONS)
    outcome = answer.get("outcome", {}) if isinstance(answer, dict) else {}
    if outcome.get("optionId") != "allow":
        note = text_part("Not run: the permission was not given.")
        session.client_update(call, "failed", [code_block, note])
        return ToolOutput("the user (or the permission policy) did not allow running this code")
    if not gate.may_run(turn):  # the chat's turn while a cell of the user's runs
        session.client_update(call, "pending", [code_block, text_part(WAITING)])
    free = await _wait_for_kernel(gate, turn)
    if free is not None:
        session.client_update(call, "failed", [code_block, text_part(f"Not run: {free}.")])
        return ToolOutput(f"the code was not run: {free}", error=True)
    session.client_update(call, "in_progress", [code_block])
    ran = run_code(code, ns, mask, time_left(turn))
    status = "failed" if ran.error is not None else "completed"
    session.client_update(call, status, [code_block, fenced(ran.to_text(), "text")])
    if ran.stopped == "interrupted" and turn is not None:
        # The user interrupted the kernel: the turn ends too, as after a Stop. (A cell's
        # interrupt also cancels the cell, which cancels it again: a no-op.) Not awaited here:
        # the agent must first get this answer to end its turn.
        cancel_soon(session, turn)
    return ToolOutput(ran.to_text(), error=ran.error is not None)


WAITING = "Waiting for the running cell to finish: the code runs after it."


async def _wait_for_kernel(gate: CellGate, turn: TurnHandle | None) -> str | None:
    """Wait until the code may run (`CellGate`) for `turn`; None once it may, else why not."""
    left = time_left(turn)
    limit = GATE_TIMEOUT if left is None else min(GATE_TIMEOUT, left)
    free = False
    with anyio.move_on_after(max(limit, 0)):
        async with anyio.create_task_group() as group:
            if turn is not None:  # the turn ends meanwhile: stop waiting for the cell

                async def ended() -> None:
                    await turn.wait_ended()
                    group.cancel_scope.cancel()

                group.start_soon(ended)
            free = await gate.wait(lambda: turn, max(limit, 0))
            group.cancel_scope.cancel()
    if turn is not None and (turn.done or turn.cancelling()):
        return "the turn that asked for it has ended"
    if turn is not None and turn.deadline is not None and anyio.current_time() >= turn.deadline:
        return "the turn's time limit (--timeout) has passed"
    if not free:
        return "a cell of the user's kept the kernel busy"
    return None


def cancel_soon(session: Session, turn: TurnHandle) -> None:
    """Cancel the turn as Stop does, in the session's client (not awaited: the agent must first
    get the tool's answer to end its turn)."""

    async def cancel() -> None:
        await turn.cancel()

    with contextlib.suppress(RuntimeError):  # the client is closing: its turns end with it
        session.client.task_group.start_soon(cancel)


def unshowable(code: str) -> str | None:
    """Why `code` cannot be shown to the person asked exactly as it would run (None if it can):
    the card shows the head of a long text only; controls and format characters do not show or
    reorder what is shown (a line that reads one way and runs another); a name in another
    script reads as the ASCII one it looks like (a Cyrillic `оs` is not `os`)."""
    text = fenced(code, "python")["content"]["text"] if len(code) <= MAX_CODE else ""
    if not text or card_clip.head(text, limits.TEXT_LINES).note:
        return (
            f"the code is longer than its card shows whole (at most {limits.TEXT_LINES - 2} "
            f"lines and {MAX_CODE:,} characters): run it in smaller pieces"
        )
    unseen = sorted(
        {c for c in code if c not in "\t\n\r" and category(c) in _UNSEEN_CATEGORIES}
        | set(_BLANK.findall(code))
    )
    if unseen:
        names = ", ".join(f"U+{ord(c):04X}" for c in unseen[:5])
        return (
            f"the code holds characters the user would not see as they run ({names}: controls, "
            "bidirectional, zero-width or blank characters): write them as escapes (\\u202e) "
            "instead"
        )
    lookalikes = sorted(_non_ascii_names(code))
    if lookalikes:
        return (
            f"the code has names that are not ASCII ({', '.join(map(repr, lookalikes[:5]))}), "
            "which the user could take for the ASCII names they look like: use ASCII names"
        )
    return None


def _non_ascii_names(code: str) -> set[str]:
    """The names (identifiers, attributes, keywords) of `code` that are not ASCII; none if it
    does not parse (it will not run either: the error says why).

    Read from the tree `run_code` compiles, not from tokens: tokenize (before 3.12) keeps an
    f-string whole, so a name inside `f"{...}"` was not seen, and it splits a name at a
    character Python allows inside one but `\\w` does not match (`os\u00b7name`, a middle dot
    that reads as `os.name`). The tree's names are as Python runs them (NFKC: a full-width os
    is `os`, and runs as the os it reads as)."""
    try:
        tree = ast.parse(code, "<run_code>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            continue  # a string's text, shown as written, may hold any letter
        for key, value in ast.iter_fields(node):
            values = value if isinstance(value, list) else [value]
            for each in values:
                if isinstance(each, str) and key != "type_comment" and not each.isascii():
                    names.add(each)
    return names


def title(what: str, code: str) -> str:
    """ "`what`: `<its first line>`" ("Run code in the kernel: ..."): the permission shows the
    title next to its buttons, and the whole code is in the card."""
    lines = [line.strip() for line in code.strip().splitlines()] or [""]
    first = lines[0] if len(lines[0]) <= 60 else lines[0][:59] + "…"
    more = f" (+{len(lines) - 1} more lines)" if len(lines) > 1 else ""
    return f"{what}: {code_span(first)}{more}"


def code_span(text: str) -> str:
    """`text` as a Markdown code span: titles are drawn as Markdown, where `obj.__dict__` would
    show as obj.**dict** and `x = 1 \\# y` lose its backslash; in a span, it shows as it is."""
    if not text:
        return ""
    ticks = "`" * (_longest_backticks(text) + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def text_part(text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": text}}


def fenced(text: str, language: str) -> dict[str, Any]:
    # A fence longer than any run of backticks inside, so the code cannot close it.
    ticks = "`" * max(3, _longest_backticks(text) + 1)
    return text_part(f"{ticks}{language}\n{text}\n{ticks}")


def _longest_backticks(text: str) -> int:
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return longest


def time_left(turn: TurnHandle | None) -> float | None:
    """Seconds until the turn's deadline, if it has one."""
    if turn is None or turn.deadline is None:
        return None
    return turn.deadline - anyio.current_time()


def arg(args: dict[str, Any], name: str, kind: type, default: Any = None) -> Any:
    """A tool's argument `name` of type `kind` (TypeError if it is not), else `default`."""
    value = args.get(name, default)
    if value is None or (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
        if value is None and default is not None:
            return default
        raise TypeError(f"{name} must be a {kind.__name__}")
    return value
