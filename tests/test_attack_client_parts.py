"""The agent rewrites the parts the client makes itself (issue 20, item 1).

The kernel tools' `run_code` card was an ordinary tool call under a counted id
(`acpnb-kernel-run-1`, ...): while "Allow" was pending, the agent's `tool_call_update` for that id
made the card show other code than the code that would run, and the saved record kept the
agent's code and output. Now the fold owns the client's calls: their ids are drawn at random and
recorded as the client's, and whatever the agent sends about one (an update, a `tool_call`, a
permission request) is refused and said in the turn.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_notebook.protocol.fold import SessionFold
from tests.agents.script import script
from tests.client_helpers import Agent
from tests.nb_util import execute, scripted, text, transcripts
from tests.shared_kernel import SharedKernel

pytestmark = pytest.mark.timeout(180)

FAKE = "print('hello')"
FAKE_TITLE = f"Run code in the kernel: {FAKE}"
#: The ids the client's card had before (a counter per kernel): the agent tries the first few.
GUESSES = [f"acpnb-kernel-run-{n}" for n in range(1, 9)]


def fenced(code: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": f"```python\n{code}\n```"}}


def spoof(call_id: str, kind: str) -> dict[str, Any]:
    """What the agent sends for the client's card: other code, its output, done."""
    return {
        "sessionUpdate": kind,
        "toolCallId": call_id,
        "title": FAKE_TITLE,
        "kind": "execute",
        "status": "completed",
        "rawInput": {"code": FAKE},
        "rawOutput": {"stdout": "hello\n"},
        "content": [fenced(FAKE), fenced("hello")],
    }


def spoofs(ids: list[str]) -> list[dict[str, Any]]:
    return [{"update": spoof(i, kind)} for i in ids for kind in ("tool_call_update", "tool_call")]


# -- the fold ------------------------------------------------------------------------------------


def test_the_agent_cannot_change_nor_ask_about_a_call_of_the_clients() -> None:
    fold = SessionFold()
    fold.begin_turn("turn-1", [])
    mine = fold.client_call("execute", "Run code in the kernel: x = 1", [fenced("x = 1")])
    assert mine is not None and mine.by_client
    other = fold.client_call("execute", "Run code in the kernel: y = 2", [fenced("y = 2")])
    assert other is not None and other.tool_call_id != mine.tool_call_id
    assert len(mine.tool_call_id) > 30  # drawn at random, not counted: nothing to guess
    before = mine.to_json()
    for kind in ("tool_call_update", "tool_call"):
        fold.apply(spoof(mine.tool_call_id, kind))
    assert fold.refused("session/request_permission", mine.tool_call_id)
    assert mine.to_json() == before  # nothing of the agent's in it
    record = fold.end_turn()
    assert record is not None
    (warning,) = [p for p in record.parts if p.kind == "error"]  # told once for the call
    assert mine.tool_call_id in warning.message and "refused" in warning.message
    assert [p.tool_call_id for p in record.parts if p.kind == "tool_call"] == [
        mine.tool_call_id,
        other.tool_call_id,
    ]
    # The agent's own call, even one that says it is the client's, is the agent's.
    fold.begin_turn("turn-2", [])
    fold.apply({**spoof("c1", "tool_call"), "byClient": True, "_meta": {"byClient": True}})
    (theirs,) = [p for p in fold.turn.parts if p.kind == "tool_call"] if fold.turn else []
    assert not theirs.by_client and "byClient" not in theirs.to_json()
    assert not fold.refused("tool_call_update", "c1")


def test_the_clients_update_goes_on_from_what_it_asked_with() -> None:
    fold = SessionFold()
    fold.begin_turn("turn-1", [])
    call = fold.client_call("execute", "Run code in the kernel: x = 1", [fenced("x = 1")])
    assert call is not None
    asked = fold.add_client_permission(call, [{"optionId": "allow", "kind": "allow_once"}])
    assert asked.tool_call_id == call.tool_call_id and asked.title == call.title
    fold.client_update(call, "completed", [fenced("x = 1"), fenced("1")])
    assert call.status == "completed" and len(call.content) == 2
    assert call.to_json()["byClient"] is True


@pytest.mark.anyio
@pytest.mark.scripted_agent("in_process")
async def test_a_permission_request_for_the_clients_call_is_refused(agent: Agent) -> None:
    """The agent names the client's call in a request of its own: answered `cancelled`, nobody
    is asked (the buttons would stand under the client's title)."""
    asked: list[Any] = []

    async def handler(request: Any) -> str:
        asked.append(request)
        return "allow"

    with anyio.fail_after(30):
        async with agent.client(permission_handler=handler) as client:
            session = await client.new_session()
            call = session.client_call("execute", "Run code in the kernel: x = 1", [])
            assert call is not None
            request = {"toolCallId": call.tool_call_id, "kind": "read", "title": "look"}
            steps = [
                {"permission": request},
                {"update": spoof(call.tool_call_id, "tool_call_update")},
            ]
            result = await (await session.prompt(script(*steps))).wait()
    assert asked == []
    assert result.text == 'PERMISSION {"result": {"outcome": {"outcome": "cancelled"}}}'
    assert not [p for p in result.parts if p.kind == "permission"]
    assert call.title == "Run code in the kernel: x = 1" and call.status == "pending"
    (warning,) = [p for p in result.parts if p.kind == "error"]
    assert "session/request_permission" in warning.message


# -- in a kernel ---------------------------------------------------------------------------------

REAL = "from pathlib import Path\nPath('ran.txt').write_text('the real code')\nran = 'real'"

PERSON = """\
import asyncio
from pathlib import Path
from acp_notebook.magics import instance
from acp_notebook.protocol.mutations import Delta, PartUpdated
from acp_notebook.protocol.state import MessagePart, ToolCallPart

session = instance(get_ipython()).runtime.sessions["s"].session
cards, spoofed, seen = {{}}, asyncio.Event(), {{}}

def hear(m):
    if isinstance(m, PartUpdated) and isinstance(m.part, ToolCallPart):
        cards.setdefault(m.part.tool_call_id, m.part)
    said = m.text if isinstance(m, Delta) else getattr(getattr(m, "part", None), "text", "")
    if "spoofed" in said:
        spoofed.set()

session.subscribe(hear)

async def person(request):
    # The card is there and waits: the agent may spoof it now (it waits on the FIFO).
    await asyncio.to_thread(Path({fifo!r}).write_text, "asked")
    await asyncio.wait_for(spoofed.wait(), 60)  # its chunk came after its updates
    seen.update(cards[request.part.tool_call_id].to_json())  # what the person is shown
    seen["asked"] = request.tool_call  # what a handler in Python is given
    return "allow"

session.permission_handler = person
"""


def the_card(record: dict[str, Any]) -> dict[str, Any]:
    """The card the person was asked about (the permission they answered), as saved."""
    (asked,) = [
        p for p in record["parts"] if p.get("type") == "permission" and p["decidedBy"] == "user"
    ]
    return next(
        p
        for p in record["parts"]
        if p.get("type") == "tool_call" and p["toolCallId"] == asked["toolCallId"]
    )


def shown(card: dict[str, Any]) -> str:
    return json.dumps(
        {k: card.get(k) for k in ("title", "status", "content", "rawInput", "rawOutput")}
    )


def test_the_agent_cannot_rewrite_the_run_code_card_while_it_is_asked(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    fifo = tmp_path / "asked.fifo"
    os.mkfifo(fifo)
    during = [{"wait_fifo": str(fifo)}, *spoofs(GUESSES), {"say": "spoofed", "message_id": "mk"}]
    run = {"name": "run_code", "arguments": {"code": REAL}}
    steps = [{"mcp": "kernel", "calls": [run], "during": during}]
    nb = execute(
        [
            f"%%agent --agent {scripted()} --session s\nhello",
            PERSON.format(fifo=str(fifo)),
            f"%%agent --agent {scripted()} --session s\n{script(*steps)}",
            "import json; print(json.dumps(seen)); print(ran)",
        ],
        tmp_path,
        timeout=150,
        kernel=kernel,
    )
    (record,) = transcripts(nb.cells[2])
    card = the_card(record)
    # Saved: the client's card, with the code that ran and what it printed; none of the agent's.
    seen_line, ran_line = text(nb.cells[3]).strip().splitlines()
    seen = json.loads(seen_line)
    # What the person was shown when they allowed it: the code, still waiting.
    assert "hello" not in shown(seen), seen
    assert seen["status"] == "pending" and seen["content"] == card["content"][:1]
    assert seen["asked"]["content"] == seen["content"] and seen["asked"]["kind"] == "execute"
    assert card["title"] == "Run code in the kernel: `from pathlib import Path` (+2 more lines)"
    assert REAL in card["content"][0]["content"]["text"]
    assert "hello" not in shown(card) and "rawInput" not in card and "rawOutput" not in card
    assert card.get("byClient") is True and card["status"] == "completed"
    # What ran: the code that was shown.
    assert (tmp_path / "ran.txt").read_text() == "the real code" and ran_line == "real"
    # The agent's updates for the ids it guessed are cards of its own.
    theirs = [p for p in record["parts"] if p.get("type") == "tool_call" and p is not card]
    assert {p["toolCallId"] for p in theirs} == set(GUESSES)
    assert not any(p.get("byClient") for p in theirs)


def test_no_card_past_the_turns_limits() -> None:
    """The turn cannot keep the card and its request whole: no card (the client asks nobody
    about what it could not show)."""
    from acp_notebook.protocol.limits import Limits

    fold = SessionFold(limits=Limits(parts=3, turn_chars=10_000))
    fold.begin_turn("turn-1", [])
    fold.apply({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "a"}})
    assert fold.client_call("execute", "Run", [fenced("x = 1")]) is not None
    assert fold.client_call("execute", "Run", [fenced("y = 2")]) is None  # one part left
    fold.begin_turn("turn-2", [])
    assert fold.client_call("execute", "Run", [fenced("z" * 20_000)]) is None  # too big


def test_code_the_card_cannot_show_as_it_runs_is_not_run(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    """Code longer than the card shows whole, or with characters that show it otherwise than it
    runs (bidirectional controls, a zero-width space in a string, a name in Cyrillic that reads
    as an ASCII one): refused before anyone is asked, even when execute is allowed."""
    long = "\n".join(f"x{i} = {i}" for i in range(250)) + "\nlong_ran = True"
    wide = f"wide_ran = '{'x' * 30_000}'"
    reordered = "reordered_ran = True  # \u202e } \u2066"
    hidden = "hidden_ran = 'admin\u200b'"
    lookalike = "import os\n\u043es = os\nlookalike_ran = \u043es.name"  # a Cyrillic о
    # A middle dot, which Python takes inside a name and which reads as `os.name`; a name inside
    # an f-string (tokenize before 3.12 saw neither).
    dotted = "import os\nos\u00b7name = 'posix'\ndotted_ran = os\u00b7name"
    in_fstring = "fstring_ran = f\"{(\u043es := __import__('os')).name}\""
    # Letters and marks that draw nothing (a Hangul filler, a variation selector, the blank
    # Braille pattern): 'admin' to the reader, as U+200B.
    blank = "blank_ran = ('admin\u3164', 'admin\ufe0f', 'admin\u2800')"
    codes = (long, wide, reordered, hidden, lookalike, dotted, in_fstring, blank)
    calls = [{"name": "run_code", "arguments": {"code": c}} for c in codes]
    steps = script({"mcp": "kernel", "calls": calls})
    nb = execute(
        [
            f"%%agent --agent {scripted()} --allow execute\n{steps}",
            "print([n for n in globals() if n.endswith('_ran')])",
        ],
        tmp_path,
        timeout=150,
        kernel=kernel,
    )
    (record,) = transcripts(nb.cells[0])
    said = "".join(p["text"] for p in record["parts"] if p.get("type") == "message")
    *results, _closed = json.loads(said.removeprefix("MCP "))
    assert [r["isError"] for r in results] == [True] * 8
    assert "longer than its card shows whole" in results[0]["text"]
    assert "longer than its card shows whole" in results[1]["text"]
    assert "U+202E, U+2066" in results[2]["text"] and "would not see" in results[2]["text"]
    assert "U+200B" in results[3]["text"]
    assert "names that are not ASCII ('\u043es')" in results[4]["text"]
    assert "names that are not ASCII ('os\u00b7name')" in results[5]["text"]
    assert "names that are not ASCII ('\u043es')" in results[6]["text"]
    assert "U+2800, U+3164, U+FE0F" in results[7]["text"]
    assert not [p for p in record["parts"] if p.get("type") in ("tool_call", "permission")]
    assert text(nb.cells[1]).strip() == "[]"


def test_the_clients_card_is_marked_open_and_its_title_literal() -> None:
    """Drawn, the client's card is open (its code is what the person is asked about), marked as
    the client's, which no card of the agent's can be; its title shows the code's first line as
    it is (a code span: `__dict__` is not bold, a backslash stays)."""
    from acp_notebook.kernel_tools.card import title
    from acp_notebook.protocol.turn import read_turn
    from acp_notebook.render.html import render_html

    fold = SessionFold()
    fold.begin_turn("turn-1", [])
    code = "obj.__dict__.update(x)  \\\nprint(1)"
    assert (
        fold.client_call("execute", title("Run code in the kernel", code), [fenced(code)])
        is not None
    )
    fold.apply(spoof("c1", "tool_call"))
    record = fold.end_turn()
    assert record is not None
    html = render_html(read_turn({"turnId": "t", "parts": [p.to_json() for p in record.parts]}))
    mine, theirs = html.split("<details")[1:3]
    assert mine.startswith(" class='acpnb-tool acpnb-own' open>") and "acp_notebook's own" in mine
    assert "<code>obj.__dict__.update(x) \\</code> (+1 more lines)" in mine
    assert theirs.startswith(" class=acpnb-tool>") and "acp_notebook's own" not in theirs
