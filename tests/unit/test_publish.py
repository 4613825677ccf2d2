"""The ways out other than a cell's display: exceptions, log records, widgets, reprs."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from IPython.core.error import UsageError

from acp_notebook.display import masking, publish
from acp_notebook.errors import TurnInterrupted
from acp_notebook.protocol.redact import MASK, Redactor
from acp_notebook.protocol.turn import TurnResult, read_turn
from acp_notebook.render import MIME_TRANSCRIPT
from acp_notebook.widgets.controls import option_label

KEY = "sk-pub-" + "Q7w/E9r+T2y=U4i" * 2


@pytest.fixture
def late_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A key set in os.environ after the kernel's redactor was built."""
    monkeypatch.setitem(os.environ, "MY_LATE_API_KEY", KEY)
    yield KEY


def test_a_magic_error_leaves_masked_with_its_chain(late_key: str) -> None:
    async def failing() -> None:
        try:
            raise ValueError(f"agent said {urllib.parse.quote(late_key, safe='')}")
        except ValueError as exc:
            raise UsageError(f"cannot apply: {late_key[:20]}") from exc

    with pytest.raises(UsageError) as caught:
        asyncio.run(publish.guarded(failing()))
    assert str(caught.value) == f"cannot apply: {MASK}"
    assert str(caught.value.__cause__) == f"agent said {MASK}"


@pytest.mark.parametrize("interrupt", [asyncio.CancelledError, KeyboardInterrupt])
def test_an_interrupt_leaves_a_magic_as_one_line(interrupt: type[BaseException]) -> None:
    async def interrupted() -> None:
        raise interrupt()

    with pytest.raises(TurnInterrupted) as caught:
        asyncio.run(publish.guarded(interrupted()))
    assert caught.value.__context__ is None  # nothing chained for IPython to show
    assert caught.value._render_traceback_() == [
        "\x1b[31mTurnInterrupted\x1b[0m: the cell was stopped by the kernel's interrupt"
    ]

    async def cancelled_turn() -> None:  # a turn's own, more precise line goes through as it is
        raise TurnInterrupted("the turn was cancelled")

    with pytest.raises(TurnInterrupted, match=r"^the turn was cancelled$"):
        asyncio.run(publish.guarded(cancelled_turn()))


def test_log_records_of_the_extension_are_masked(late_key: str) -> None:
    masking.install_log_mask()
    logger = logging.getLogger("acp_notebook")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    try:
        logger.warning("acp_notebook: garbage %s", f"KEY={late_key}")
        try:
            raise RuntimeError(late_key)
        except RuntimeError:
            logger.exception("failed with %r", late_key[:18])
    finally:
        logger.removeHandler(handler)
    out = stream.getvalue()
    assert late_key[:16] not in out, out
    assert out.count(MASK) == 3, out


def test_permission_buttons_are_masked() -> None:
    """The words of a permission button (what the turn view's page shows) are masked."""
    option = {"optionId": "ok", "name": f"Allow {KEY}", "kind": "allow_once"}
    label = option_label(option, Redactor([KEY]).text)
    assert KEY not in label and KEY[:16] not in label and MASK in label, label


def test_reprs_shown_as_cell_values_are_masked(
    late_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    from acp_notebook.display.reprs import register
    from acp_notebook.protocol.turn import TurnResult

    shell = InteractiveShell.instance()
    register(shell, publish.REDACTOR)
    result = TurnResult(turn_id="t1", success=True, text=f"the key: {late_key}")
    bundle, _ = shell.display_formatter.format(result)
    assert bundle and all(late_key[:16] not in str(v) for v in bundle.values()), bundle
    assert "the key: " in bundle["text/plain"]  # the rendered text, not the repr

    # A session's repr quotes its id, which the agent chose.
    from acp_notebook.client.session import Session

    monkeypatch.setattr(Session, "__repr__", lambda self: f"<Session {late_key}>")
    bundle, _ = shell.display_formatter.format(Session.__new__(Session))
    assert bundle["text/plain"] == f"<Session {MASK}>"


@pytest.mark.anyio
async def test_the_chat_widget_masks_its_turns_and_status(tmp_path: Path) -> None:
    from acp_notebook.chat.widget import ChatWidget
    from tests.agents.script import script
    from tests.client_helpers import Agent

    agent = Agent(tmp_path)
    steps = script(
        {"say": f"the key is {urllib.parse.quote(KEY, safe='')} and {KEY[:20]}"},
        {
            "update": {
                "sessionUpdate": "usage_update",
                "used": 1,
                "size": 10,
                "cost": {"amount": 0.5, "currency": KEY},
            }
        },
    )
    async with agent.session(bound=30) as session:
        chat = ChatWidget(session, redactor=Redactor([KEY]))
        await chat.send(steps)
        # The turn as its view showed it last and as the chat's record keeps it, the
        # user's message (which holds the key too) included.
        (view,) = chat.views.values()
        assert chat.log.children == (view.widget,)
        (record,) = chat.records
        assert view.final is not None
        page = json.dumps(view.diff.snapshot(view.final))  # what a (re)connecting page gets
        whole = chat.record()
        shown = [record["text/html"], chat.status.value, page, *whole.values()]
        chat.close()
    assert "the key is" in shown[0] and MASK in shown[0], shown
    assert all(KEY[:16] not in str(s) and "Q7w%2FE9r" not in str(s) for s in shown), shown
    assert MASK in shown[1], shown
    assert "the key is" in shown[2] and MASK in shown[2], shown


def _stub_session(subscribe: Any) -> Any:
    """A session whose turn "t1" holds a million characters of text: its live view may redraw
    (`live_meter.py`), and does not read what it holds (its bundles are stubs)."""
    from types import SimpleNamespace

    from acp_notebook.protocol.limits import DEFAULT_LIMITS
    from acp_notebook.protocol.turn import TurnRecord

    record = TurnRecord(turn_id="t1")
    record.budget.text -= 1_000_000
    client = SimpleNamespace(options=SimpleNamespace(limits=DEFAULT_LIMITS))
    return SimpleNamespace(subscribe=subscribe, turn_record=record, client=client)


def _long_turn(answer: str) -> dict[str, object]:
    part = {"type": "message", "id": "m1", "role": "agent", "text": answer}
    return {"turnId": "t1", "text": answer, "parts": [part]}


def test_a_headless_redraw_draws_the_end_of_a_long_answer(late_key: str) -> None:
    from acp_notebook.display.live import LIVE_TAIL
    from acp_notebook.render import LIVE_FORMATS, MIME_TRANSCRIPT

    # The key straddles where the tail starts: masked before the cut, no piece of it is shown.
    body = "x" * (3 * LIVE_TAIL) + late_key + " the middle.\n\n" + "last words " * 100
    cut = len(body) - LIVE_TAIL + len(late_key) // 2
    answer = body[: cut - 1] + "\n" + body[cut:]  # a line break inside the key's window
    formats = (*LIVE_FORMATS, MIME_TRANSCRIPT)
    bundle = publish.turn(_long_turn(answer), live=True, formats=formats, tail=LIVE_TAIL)
    for mime in LIVE_FORMATS:
        drawn = bundle[mime]
        assert LIVE_TAIL // 2 < len(drawn) < 2 * LIVE_TAIL, (mime, len(drawn))
        assert "last words" in drawn and "earlier characters" in drawn
        assert late_key[-8:] not in drawn and late_key[:8] not in drawn
    # The transcript (which `acp-notebook run` prints from) is whole, and masked.
    (part,) = bundle[MIME_TRANSCRIPT]["parts"]
    assert MASK in part["text"] and late_key not in part["text"]
    assert part["text"].endswith("last words ")
    # Without `tail` (the record at the end), everything is drawn.
    whole = publish.turn(_long_turn(answer), formats=LIVE_FORMATS)
    assert len(whole["text/plain"]) > 3 * LIVE_TAIL


def test_a_short_answer_is_drawn_whole_by_a_redraw() -> None:
    from acp_notebook.render.clip import live_tail

    turn = _long_turn("short\n\nanswer")
    assert live_tail(turn, 100) is turn
    # Cut at a paragraph break in the window's first half, so Markdown starts clean.
    clipped = live_tail(_long_turn("a" * 500 + "\n\n```\ncode\n```\n" + "b" * 30), 60)
    text = clipped["parts"][0]["text"]  # type: ignore[index]
    assert text.split("\n\n", 1)[1] == "```\ncode\n```\n" + "b" * 30
    assert text.startswith("[… 502 earlier characters")


def test_closing_a_live_view_does_not_wait_out_its_pause_between_redraws() -> None:
    from types import SimpleNamespace

    from acp_notebook.display.live import LiveView

    subscribers: list[Any] = []
    session = _stub_session(lambda f: subscribers.append(f) or (lambda: None))
    turn = SimpleNamespace(id="t1", result=None)

    async def main() -> float:
        # One redraw a minute: after the first, the render task pauses for 60 s.
        view = LiveView(session, turn, max_rate=1 / 60, show=False)  # type: ignore[arg-type]
        view.start()
        subscribers[0](SimpleNamespace(turn_id="t1"))  # a mutation of the turn
        for _ in range(5):
            await asyncio.sleep(0)  # the task redraws, then pauses
        started = time.monotonic()
        with anyio.fail_after(5):
            await view.aclose()
        return time.monotonic() - started

    assert asyncio.run(main()) < 1


def test_a_live_view_listens_while_its_turn_is_small_and_hears_every_chunk_of_a_long_one() -> None:
    """A turn under `LISTEN_FROM`: once a mutation makes a redraw due, the view unsubscribes
    (the session builds no `Delta` for it) and the redraw reads the parts. A longer turn: the
    view hears every chunk, each `Delta` being the text the redraw masks and draws
    (`live_turn.py`), so none may be missed. Either way one redraw for many chunks, none for
    another turn's, and no subscription once the turn ended."""
    from types import SimpleNamespace

    from acp_notebook.display.live import LiveView
    from acp_notebook.display.live_turn import LISTEN_FROM
    from acp_notebook.protocol.mutations import Delta
    from acp_notebook.protocol.state import MessagePart

    subscribers: list[Any] = []
    drawn: list[str] = []

    def subscribe(f: Any) -> Any:
        subscribers.append(f)
        return lambda: subscribers.remove(f)

    session = _stub_session(subscribe)
    session.usage, session.id, session.title, session.terminal_views = None, "s1", None, {}
    session.client.agent_name = "demo"
    record = session.turn_record
    answer = MessagePart("m1", "agent")
    record.parts.append(answer)
    turn = SimpleNamespace(id="t1", result=None, prompt=[])

    def chunk(text: str, turn_id: str = "t1") -> None:
        if turn_id == "t1":
            answer.append(text)
        for subscriber in list(subscribers):
            subscriber(Delta(turn_id, "m1", "text", text))

    async def main() -> None:
        drew = asyncio.Event()

        def bundle(tail: int = 0) -> dict[str, Any]:
            view.live.sync()
            drawn.append(view.live.texts["m1"].text())
            drew.set()
            return {}

        async def redrawn() -> None:
            with anyio.fail_after(5):
                await drew.wait()
            drew.clear()

        view = LiveView(session, turn, max_rate=1000, show=False)  # type: ignore[arg-type]
        view._bundle = bundle  # type: ignore[method-assign]
        view._handle = SimpleNamespace()  # type: ignore[assignment]  # draws, to a stub
        view.start()
        chunk("not ours", turn_id="another turn")  # due, it would draw before the rest
        assert len(subscribers) == 1
        chunk("one ")
        assert subscribers == []  # a small turn: a redraw is due, nothing more to hear
        chunk("two ")  # not heard: read from the part
        await redrawn()
        assert drawn == ["one two "] and len(subscribers) == 1  # one redraw, listening again
        record.budget.text -= LISTEN_FROM  # the turn grew long (as its budget counts)
        chunk("three ")
        await redrawn()  # from this redraw on, every chunk is heard
        for word in ("four ", "five"):
            chunk(word)
        assert len(subscribers) == 1  # still listening, though a redraw is due
        await redrawn()
        assert drawn == ["one two ", "one two three ", "one two three four five"]
        view.finish(TurnResult(turn_id="t1", success=True, text=""), keep_record=True)
        await view.aclose()
        assert subscribers == []

    publish_update, publish.update = publish.update, lambda handle, bundle: None
    try:
        asyncio.run(main())
    finally:
        publish.update = publish_update


def test_a_live_views_first_redraw_keeps_the_pause_after_its_first_display() -> None:
    """The display `start` shows counts for the rate limit: the chunks that follow at once are
    drawn a pause later (1 / max_rate), not in a message of their own right after it."""
    from types import SimpleNamespace

    from acp_notebook.display.live import LiveView

    subscribers: list[Any] = []
    session = _stub_session(lambda f: subscribers.append(f) or (lambda: None))
    turn = SimpleNamespace(id="t1", result=None)
    sent: list[tuple[str, float]] = []

    async def main() -> None:
        updated = asyncio.Event()

        def show(bundle: Any, *, display_id: bool = False) -> Any:
            sent.append(("show", time.perf_counter()))
            return SimpleNamespace()

        def update(handle: Any, bundle: Any) -> None:
            sent.append(("update", time.perf_counter()))
            updated.set()

        publish.show, publish.update = show, update  # type: ignore[assignment]
        view = LiveView(session, turn, max_rate=5, show=True)  # type: ignore[arg-type]
        view._bundle = lambda tail=0: {}  # type: ignore[method-assign]
        view.start()
        subscribers[0](SimpleNamespace(turn_id="t1"))  # the first chunk, at once
        with anyio.fail_after(10):
            await updated.wait()
        view.finish(TurnResult(turn_id="t1", success=True, text=""), keep_record=True)
        await view.aclose()

    saved = publish.show, publish.update
    try:
        asyncio.run(main())
    finally:
        publish.show, publish.update = saved
    (first, shown), (second, redrawn) = sent[:2]
    assert (first, second) == ("show", "update")
    assert redrawn - shown >= 0.19  # 1/5 s, less the clock's resolution


def test_a_record_keeps_the_answer_once_and_reads_back_the_same() -> None:
    parts = [
        {"type": "message", "id": "t1", "role": "thought", "text": "first, "},
        {"type": "message", "id": "m1", "role": "agent", "text": "The answer"},
        {"type": "message", "id": "t2", "role": "thought", "text": "then"},
        {"type": "message", "id": "m2", "role": "agent", "text": "in two parts."},
    ]
    whole = {"turnId": "t", "success": True, "parts": parts}
    whole |= {"text": "The answer\n\nin two parts.", "thoughts": "first, \n\nthen"}
    bundle = publish.turn(whole)
    assert "text/markdown" not in bundle  # no front-end shows it beside the HTML
    saved = bundle[MIME_TRANSCRIPT]
    assert "text" not in saved and "thoughts" not in saved and saved["parts"] == parts
    assert TurnResult.from_json(saved).to_json() == TurnResult.from_json(whole).to_json()
    turn, again = read_turn(saved), read_turn(whole)
    assert (turn.text, turn.thoughts) == (again.text, again.thoughts)
    # A top-level text its parts do not hold (a hand-made transcript) is kept.
    other = publish.turn({**whole, "text": "Something else"})[MIME_TRANSCRIPT]
    assert other["text"] == "Something else" and "thoughts" not in other


def test_a_redraw_costly_once_does_not_stop_the_view_but_one_costly_each_time_slows_it() -> None:
    """The pause after a redraw is three times the redraws' cost, smoothed: a one-off (the first
    code block's lexer loaded: 25 ms) moved it to 150 ms, text held back; a turn costly to draw
    every time is still redrawn less often, its drawing about a quarter of the loop."""
    from types import SimpleNamespace

    from acp_notebook.display.live import LiveView

    session = _stub_session(lambda f: lambda: None)
    view = LiveView(session, SimpleNamespace(id="t1", result=None), max_rate=60, show=False)  # type: ignore[arg-type]
    for _ in range(10):
        assert view._pause(0.002) == pytest.approx(1 / 60)
    once = view._pause(0.050)
    assert once < 0.05, once  # not 0.15
    assert view._pause(0.002) < once
    for _ in range(20):
        steady = view._pause(0.050)
    assert steady == pytest.approx(0.15, rel=0.05)
