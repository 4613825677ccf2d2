"""The live views' redraw without round trips (display/live_turn.py, widgets/turn_diff.py).

A redraw masks and draws what the fold's mutations changed since the last one, not the whole
turn: these tests feed a turn record and its `Delta`s by hand (no agent, no kernel) and check
what the views would send: the same as masking the whole turn would give, no piece of a key
split across chunks, and a redraw's masking work bounded by what was appended, whatever the
turn's length.
"""

from __future__ import annotations

import json
import random
from types import SimpleNamespace
from typing import Any

import pytest

from acp_notebook.client.transcript import live_transcript
from acp_notebook.display import live_turn
from acp_notebook.display.live_turn import LiveTurn, MaskedText
from acp_notebook.protocol.limits import DEFAULT_LIMITS
from acp_notebook.protocol.mutations import Delta, PartUpdated
from acp_notebook.protocol.redact import MASK, Redactor
from acp_notebook.protocol.state import MessagePart, ToolCallPart
from acp_notebook.protocol.turn import TurnRecord
from acp_notebook.render.clip import live_tail
from acp_notebook.widgets.turn_diff import TurnDiff

KEY = "sk-live-Ab3/xY9+zQ7=mN2_pL8-kR4.tW6~vB1c"
OTHER = "ghp_Zq8xW2vN5rT7yU1iO3pL9kJ4hG6fD0sA"


def leaks(text: str, key: str = KEY) -> bool:
    """Any 10 characters of the key, as they are or JSON-escaped."""
    spelled = [key, json.dumps(key)[1:-1]]
    return any(s[i : i + 10] in text for s in spelled for i in range(len(s) - 9))


class Turn:
    """A turn record fed by hand, as the fold would: each change with its mutation."""

    def __init__(self, redactor: Redactor) -> None:
        self.record = TurnRecord(turn_id="t1")
        client = SimpleNamespace(agent_name="demo", options=SimpleNamespace(limits=DEFAULT_LIMITS))
        session = SimpleNamespace(
            turn_record=self.record,
            usage=None,
            id="s1",
            client=client,
            terminal_views={},
            title=None,
            config_options=[],
            cwd=".",
        )
        self.session = session
        self.handle = SimpleNamespace(id="t1", prompt=[{"type": "text", "text": "hi"}])
        self.live = LiveTurn(session, self.handle, redactor)  # type: ignore[arg-type]
        self.live.subscribed = True  # as a view's: each change is handed to `take`

    def message(self, pid: str, text: str, role: str = "agent") -> MessagePart:
        part = MessagePart(pid, role)
        part.append(text)
        self.record.parts.append(part)
        self.live.take(PartUpdated("t1", part))
        return part

    def append(self, part: MessagePart, text: str) -> None:
        part.append(text)
        self.live.take(Delta("t1", part.part_id, "text", text))

    def tool(self, pid: str, title: str) -> ToolCallPart:
        call = ToolCallPart(pid, pid, title, "execute", "in_progress")
        self.record.parts.append(call)
        self.record.tool_calls[pid] = call
        self.live.take(PartUpdated("t1", call))
        return call

    def whole(self, redactor: Redactor) -> dict[str, Any]:
        """What the views drew before: the whole turn's JSON, masked (live)."""
        transcript = live_transcript(self.session, self.record, self.handle)  # type: ignore[arg-type]
        masked: dict[str, Any] = redactor.obj(transcript, live=True)
        return masked


class Page:
    """What a widget view's page holds: the texts streamed to it, the HTML of each part."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}
        self.sent: list[str] = []

    def apply(self, ops: list[dict[str, Any]]) -> None:
        for op in ops:
            self.sent.append(json.dumps(op))
            if op["op"] == "stream":
                self.texts[op["id"]] = op["text"]
            elif op["op"] == "append":
                self.texts[op["id"]] += op["text"]


def redraw(turn: Turn, diff: TurnDiff, page: Page) -> None:
    drawn = turn.live.transcript()
    changed = set(turn.live.changed)
    turn.live.changed.clear()
    page.apply(diff.update(drawn, turn.live.texts, changed))


@pytest.fixture(params=["reading the parts", "hearing the mutations"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A turn under `LISTEN_FROM` (what changed is read from the parts) and one over it (from
    the mutations): both must give the same."""
    if request.param == "hearing the mutations":
        monkeypatch.setattr(live_turn, "LISTEN_FROM", 0)
    return str(request.param)


def collapsed(text: str) -> str:
    while MASK * 2 in text:
        text = text.replace(MASK * 2, MASK)
    return text


def test_a_key_split_across_chunks_and_redraws_never_shows(mode: str) -> None:
    rng = random.Random(3)
    pieces = ["plain words and sk-live- or ghp_ starts. " * 30, "\n\n", KEY, OTHER, KEY[:20]]
    for _ in range(20):
        redactor = Redactor([KEY, OTHER])
        turn, diff, page = Turn(redactor), TurnDiff(), Page()
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(3, 30)))
        answer = turn.message("m1", text[:1])
        at = 1
        while at < len(text):
            step = rng.randint(1, 120)  # chunks of any size: a key cut anywhere
            turn.append(answer, text[at : at + step])
            at += step
            if rng.random() < 0.2:
                redraw(turn, diff, page)
                tail = json.dumps(turn.live.tail_transcript(2_000))
                assert not leaks(tail) and not leaks(tail, OTHER)
        redraw(turn, diff, page)
        assert not any(leaks(s) or leaks(s, OTHER) for s in page.sent)
        # What the page holds is the whole text masked (two masks meeting at a cut stay two).
        shown = redactor.text(text, live=True)
        assert collapsed(page.texts["m1"]) == collapsed(shown)


def test_the_views_draw_what_masking_the_whole_turn_drew(mode: str) -> None:
    redactor = Redactor([KEY])
    turn = Turn(redactor)
    thought = turn.message("m1", "thinking about " + KEY[:12], role="thought")
    turn.append(thought, KEY[12:] + " and more")
    turn.tool("c1", f"run with {KEY}")
    answer = turn.message("m2", "x" * 30_000 + "\n\nthe end, " + KEY[:10])
    turn.append(answer, KEY[10:] + " done")
    for chars in (200, 5_000, 40_000, 100_000):
        mine = turn.live.tail_transcript(chars)
        before = live_tail(turn.whole(redactor), chars)
        assert [collapsed(json.dumps(p)) for p in mine["parts"]] == [
            collapsed(json.dumps(p)) for p in before["parts"]
        ], chars
        # The top-level keys are written by the one writer of a transcript's (`turn_json`);
        # the texts and plan are the parts' (`live_tail` leaves them out when it cuts).
        drawn_keys = ("parts", "duration", "text", "thoughts", "plan")
        tops = [{k: v for k, v in t.items() if k not in drawn_keys} for t in (mine, before)]
        assert tops[0] == tops[1] and mine.keys() == before.keys()
    drawn = turn.live.transcript()
    assert [p.part_id for p in drawn.parts] == ["m1", "c1", "m2"]
    assert drawn.parts[0].text == redactor.text(thought.text, live=True)  # type: ignore[union-attr]
    assert KEY not in drawn.parts[1].title  # type: ignore[union-attr]
    assert turn.live.texts["m2"].text() == redactor.text(answer.text, live=True)


def test_a_redraw_masks_what_was_appended_not_the_turn(mode: str) -> None:
    """The masking work of a redraw after a chunk is the chunk (and a key's length around it),
    the same for a turn of 100 KB and of 2 MB."""

    class Counting(Redactor):
        masked = 0

        def text(self, value: str, *, live: bool = False) -> str:
            Counting.masked += len(value)
            return super().text(value, live=live)

        def settle(self, text: str) -> tuple[str, str]:
            Counting.masked += len(text)
            return super().settle(text)

        def obj(self, value: Any, *, live: bool = False) -> Any:
            Counting.masked += len(json.dumps(value))
            return super().obj(value, live=live)

    work = []
    for length in (100_000, 2_000_000):
        redactor = Counting([KEY, OTHER])
        turn, diff, page = Turn(redactor), TurnDiff(), Page()
        turn.tool("c1", "a tool call before the answer")
        answer = turn.message("m1", "ordinary words, sk and ghp. " * (length // 28))
        redraw(turn, diff, page)
        turn.live.tail_transcript(16_000)
        costs = []
        for _ in range(5):
            turn.append(answer, "a new chunk of about forty characters. ")
            Counting.masked = 0
            redraw(turn, diff, page)
            turn.live.tail_transcript(16_000)
            costs.append(Counting.masked)
        work.append(max(costs))
        assert page.sent[-2].startswith('{"op": "append"')
        assert page.sent[-1].startswith('{"op": "md"')  # its new end, as HTML
    # The same but for a few digits (the duration in the tail's top-level fields).
    assert abs(work[0] - work[1]) < 50, work
    assert work[1] < 5_000, work  # the chunk, a key's reach around it, the small fields


def test_a_key_that_joins_the_environment_masks_what_was_streamed_anew(mode: str) -> None:
    environ = {"HOME": "/home/x"}
    redactor = Redactor(environ=environ)
    turn, diff, page = Turn(redactor), TurnDiff(), Page()
    answer = turn.message("m1", f"the value is {KEY}, and")
    redraw(turn, diff, page)
    assert KEY in page.texts["m1"]  # not a secret yet
    environ["MY_API_KEY"] = KEY  # a cell ran load_dotenv()
    turn.append(answer, " more")
    redraw(turn, diff, page)
    assert page.sent[-2].startswith('{"op": "stream"')  # the text again, whole
    assert page.sent[-1].startswith('{"op": "md", "id": "m1", "keep": 0')  # and its HTML
    assert not leaks(page.texts["m1"]) and page.texts["m1"].endswith("and more")


def test_masked_text_reads_its_end_without_the_whole() -> None:
    redactor = Redactor([KEY])
    text = MaskedText(redactor, "a" * 3_000_000)
    assert text.length == 3_000_000
    text.feed("b" * 10)
    before, end = text.tail(100)
    assert before == 3_000_010 - 100 and end == "a" * 90 + "b" * 10
    assert text.since(3_000_005) == "b" * 5
