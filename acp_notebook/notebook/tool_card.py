"""The client's own card for a kernel tool's request: what the person is asked about, shown
whole and as it runs (`run_code` in `kernel_server_mcp`, `insert_cell` in `notebook_edit`).

The code must be one the card shows whole and in the order it runs (`unshowable`), its title
names its first line (`title`), the options are Allow and Reject (`OPTIONS`); `fenced` and
`text_part` are the card's content parts. `arg` and `time_left` are the tools' argument check
and the turn's time.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Any
from unicodedata import category

import anyio

from ..protocol import limits
from ..render import clip as card_clip

if TYPE_CHECKING:
    from ..client.turn import TurnHandle

#: Characters of code run_code takes: what its card shows whole (render/clip.py's head of a
#: text, which is also at most `limits.TEXT_LINES` lines), less its fence.
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


def arg(args: dict[str, Any], name: str, kind: type, default: Any = None) -> Any:
    value = args.get(name, default)
    if value is None or (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
        if value is None and default is not None:
            return default
        raise TypeError(f"{name} must be a {kind.__name__}")
    return value


def time_left(turn: TurnHandle | None) -> float | None:
    """Seconds until the turn's deadline, if it has one."""
    if turn is None or turn.deadline is None:
        return None
    return turn.deadline - anyio.current_time()


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
