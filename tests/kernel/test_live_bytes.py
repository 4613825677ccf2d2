"""The bytes a headless live view sends per turn (issue 12: at most 2 times the transcript's, at
any pace), and that it stays live while it keeps to them (display/live_meter.py).

The record at the end sends about 1.5 times the transcript (its HTML, its text, the transcript
itself); the live updates before it send at most `LIVE_SHARE` of what the turn holds. A redraw
costs twice what it draws (HTML and text) plus its message: redrawn 25 times a second a slow
answer sent 300 times its transcript, a fast one of a second or two 2.4 times.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from acp_notebook.display import publish
from acp_notebook.display.live_meter import (
    LIVE_FORCED_MAX,
    LIVE_MESSAGE,
    LIVE_MIN_TAIL,
    LIVE_SHARE,
    LIVE_STALE_MAX,
    LIVE_TAIL,
    Meter,
    chars,
)
from acp_notebook.protocol.limits import DEFAULT_LIMITS, count
from acp_notebook.protocol.turn import TurnRecord, TurnResult
from acp_notebook.render import LIVE_FORMATS
from tests.nb_util import MIME_TURN, execute, script, scripted
from tests.shared_kernel import SharedKernel

#: Text between two redraws of a slow answer, at most: a redraw waits until what is left of the
#: share pays for its message and `LIVE_MIN_TAIL` characters drawn twice with their markup (at
#: most 3 characters sent each); the share grows by `LIVE_SHARE` of twice the text (the answer
#: is in the transcript twice). 3,500 characters: 2.1 s at the 1,700 characters a second of the
#: test below, 8.8 s at 400 (a real agent's pace).
GAP = (LIVE_MESSAGE + 3 * LIVE_MIN_TAIL) / (2 * LIVE_SHARE)


def _turn(text: str) -> dict[str, Any]:
    part = {"type": "message", "id": "m1", "role": "agent", "text": text}
    return {"turnId": "t1", "text": text, "parts": [part]}


def _stream(chunk: str, chunks: int) -> tuple[list[tuple[int, int]], int, int]:
    """A turn streamed `chunk` by `chunk`, offered a redraw after each (the view at any pace):
    (text held, characters sent) of each redraw sent, the characters sent in all, the turn's
    transcript's size (`TurnResult.to_json()` as JSON)."""
    record = TurnRecord(turn_id="t1")
    meter = Meter(DEFAULT_LIMITS, clock=lambda: 0.0)  # never stale: the share alone
    meter.shown(publish.turn(_turn(""), live=True, formats=LIVE_FORMATS))
    first = meter.sent  # shown before anything is held: the share is for what comes after
    redraws: list[tuple[int, int]] = []
    text = ""
    for _ in range(chunks):
        text += chunk
        record.budget.text -= len(chunk)  # what the fold counts of a chunk of text
        tail = meter.tail(record)
        assert tail <= LIVE_TAIL
        if tail:
            bundle = publish.turn(_turn(text), live=True, formats=LIVE_FORMATS, tail=tail)
            if meter.spend(bundle, tail, record):
                redraws.append((len(text), chars(bundle) + LIVE_MESSAGE))
        assert meter.sent - first <= LIVE_SHARE * meter.held(record)  # at every step
    result = TurnResult.from_json(_turn(text))
    return redraws, meter.sent, len(json.dumps(result.to_json()))


@pytest.mark.parametrize(
    ("chunk", "chunks"),
    [("word " * 4, 2_000), ("x" * 4_000, 100), ("para.\n\n" + "y" * 600, 40), ("hi", 3)],
    ids=["slow", "fast-long", "paragraphs", "tiny"],
)
def test_live_updates_send_a_share_of_the_transcript_whatever_the_pace(
    chunk: str, chunks: int
) -> None:
    redraws, sent, transcript = _stream(chunk, chunks)
    first = sent - sum(cost for _, cost in redraws)
    # The first display aside (it is shown before anything is held), a share of the turn.
    assert sent - first <= LIVE_SHARE * 2 * len(chunk) * chunks, (sent, redraws)
    if chunk == "hi":  # what it holds pays for no redraw: only the first display was sent
        assert redraws == [] and sent == first, redraws
    else:
        assert redraws and sent <= LIVE_SHARE * transcript, (sent, transcript)


def test_a_slow_answer_is_redrawn_as_it_grows_not_frozen() -> None:
    """Each redraw waits for the turn to pay for it: with little to spend it draws the last
    `LIVE_MIN_TAIL` characters, so redraws come every `GAP` characters to the end (the share
    grows with the text); they once stopped after a fixed allowance."""
    redraws, _, _ = _stream("word " * 4, 2_000)  # 40,000 characters, 20 at a time
    held = [n for n, _ in redraws]
    assert len(held) >= 8, held
    gaps = [b - a for a, b in itertools.pairwise(held)]
    assert max(gaps) <= GAP, gaps
    assert 40_000 - held[-1] <= GAP, held


def test_a_view_with_nothing_it_may_draw_draws_its_end_ever_less_often() -> None:
    """A short message, then ten minutes of silence (a tool running): nothing in the share pays
    for a redraw, but the message shows after `LIVE_STALE` seconds, and the redraws beyond the
    share come twice as far apart each time, up to `LIVE_STALE_MAX`."""
    now = [0.0]
    record = TurnRecord(turn_id="t1")
    meter = Meter(DEFAULT_LIMITS, clock=lambda: now[0])
    meter.shown(publish.turn(_turn(""), live=True, formats=LIVE_FORMATS))
    text = "Let me look at the tests first."
    record.budget.text -= len(text)
    times = []
    while now[0] < 600:
        tail = meter.tail(record)
        if tail:
            assert tail == LIVE_MIN_TAIL
            bundle = publish.turn(_turn(text), live=True, formats=LIVE_FORMATS, tail=tail)
            assert meter.spend(bundle, tail, record)
            times.append(now[0])
        now[0] += 0.04  # the view's loop looks again after each pause
    assert 1.0 <= times[0] <= 1.1, times
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(b > a - 0.05 for a, b in itertools.pairwise(gaps)), gaps  # never more often
    assert max(gaps) <= LIVE_STALE_MAX + 0.1, gaps
    assert len(times) <= math.log2(600) + 600 / LIVE_STALE_MAX + 1, times


def _tool(i: int) -> dict[str, Any]:
    content = [{"type": "content", "content": {"type": "text", "text": f"line {i} <of> it\n" * 20}}]
    update = {"sessionUpdate": "tool_call", "toolCallId": f"c{i}", "title": f"Read file_{i}.txt"}
    return {**update, "kind": "read", "status": "completed", "content": content}


@pytest.mark.parametrize("output", [3_000, 30_000])
def test_a_redraw_counts_the_terminal_output_its_cards_draw(output: int) -> None:
    """A tool's card draws its terminal's output (its last 20,000 characters), which the part's
    JSON does not hold: 30 cards of a terminal each drew 18,520 characters for a tail of 500,
    182,000 for one of 16,000 (a headless view then refused every redraw it drew)."""
    parts, terminals = [], []
    for i in range(30):
        content = [{"type": "terminal", "terminalId": f"t{i}"}]
        parts.append(
            {
                "type": "tool_call",
                "id": f"c{i}",
                "toolCallId": f"c{i}",
                "kind": "execute",
                "title": f"make {i}",
                "status": "completed",
                "content": content,
            }
        )
        terminals.append(
            {
                "terminalId": f"t{i}",
                "command": "make",
                "output": f"line {i}\n" * (output // 7),
                "truncated": False,
                "exitStatus": {"exitCode": 0, "signal": None},
            }
        )
    turn = {"turnId": "t1", "parts": parts, "terminals": terminals}
    for tail in (500, 2_000, 16_000):
        bundle = publish.turn(turn, live=True, formats=LIVE_FORMATS, tail=tail)
        # Drawn twice (HTML and text) with its markup: about 2.6 characters sent per character.
        assert chars(bundle) <= 3 * tail + 2_000, (tail, chars(bundle))


def test_a_redraw_draws_the_last_parts_of_a_turn_of_many() -> None:
    """A turn of many tool calls, redrawn whole, cost what it holds at every redraw: a redraw
    draws its last parts, about the tail's characters of them, after a note of how many are
    left out; the last part is drawn even when it alone is longer."""
    from acp_notebook.render.clip import live_tail

    parts: list[dict[str, Any]] = []
    for i in range(100):
        parts += [{**_tool(i), "type": "tool_call", "id": f"c{i}"}]
        parts += [{"type": "message", "id": f"m{i}", "role": "agent", "text": f"Read {i}. "}]
    turn = {"turnId": "t1", "parts": parts}
    drawn = live_tail(turn, 2_000)["parts"]
    assert drawn[0]["text"].startswith(f"[… {200 - len(drawn) + 1} earlier parts")
    assert drawn[1:] == parts[-len(drawn) + 1 :] and 2 < len(drawn) < 20, len(drawn)
    assert len(json.dumps(drawn)) < 2 * 2_000
    bundle = publish.turn(turn, live=True, formats=LIVE_FORMATS, tail=2_000)
    assert chars(bundle) < 3 * 2_000 and "file_99.txt" in bundle["text/html"]
    assert "file_90.txt" not in bundle["text/html"]
    # The last part alone over the tail: drawn (a message, its end); nothing before it.
    (note, last) = live_tail({"parts": [*parts, _turn("z" * 5_000)["parts"][0]]}, 2_000)["parts"]
    assert note["text"].startswith("[… 200 earlier parts") and len(last["text"]) < 2_100
    assert live_tail(turn, 1_000_000) is turn  # all of it fits: the transcript itself


def _big_last_parts() -> dict[str, tuple[dict[str, Any], int]]:
    """Last parts far longer than a redraw's tail, each with what the fold charges for it (the
    characters of the record's budget it takes): a tool card of ten 20,000-character outputs,
    an empty message with a 300,000-character image, a plan of 300 long steps (a plan is not
    charged: it is replaced whole, bounded by `value_chars`), an error of 300,000 (nor is it)."""
    outputs = [
        {"type": "content", "content": {"type": "text", "text": "<a> " * 5_000}} for _ in range(10)
    ]
    card = {
        "type": "tool_call",
        "id": "c1",
        "toolCallId": "c1",
        "title": "Run the <b>suite</b>",
        "kind": "execute",
        "status": "in_progress",
        "content": outputs,
    }
    image = {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo" + "A" * 300_000}
    message = {"type": "message", "id": "m1", "role": "agent", "text": "", "blocks": [image]}
    steps = [{"content": "step <x> " * 100, "priority": "high", "status": "pending"}] * 300
    plan = {"type": "plan", "id": "p1", "entries": steps}
    failure = {
        "type": "error",
        "id": "e1",
        "level": "error",
        "message": "Failed: " + "<x> " * 75_000,
    }
    return {
        "error": (failure, 0),
        "tool card": (card, count(outputs, 1 << 40)),
        "image": (message, count([image], 1 << 40)),
        "plan": (plan, 0),
    }


@pytest.mark.parametrize("kind", list(_big_last_parts()))
def test_a_stale_views_redraws_are_small_whatever_its_last_part(kind: str) -> None:
    """A turn whose last part is long, touched ten times a second for ten minutes (a tool's
    progress, a plan re-sent): nothing fits in the share, so the view is stale, and each of its
    redraws beyond the share is small (it drew the last part whole: 500,000 characters each,
    35 times the transcript in ten minutes), and a tool's card still shows what it runs."""
    part, charged = _big_last_parts()[kind]
    now = [0.0]
    record = TurnRecord(turn_id="t1")
    record.budget.chars -= charged
    meter = Meter(DEFAULT_LIMITS, clock=lambda: now[0])
    meter.shown(publish.turn(_turn(""), live=True, formats=LIVE_FORMATS))
    turn = {"turnId": "t1", "parts": [part]}
    share = LIVE_SHARE * meter.held(record)
    drawn = []
    while now[0] < 600:
        tail = meter.tail(record)
        if tail:
            bundle = publish.turn(turn, live=True, formats=LIVE_FORMATS, tail=tail)
            if meter.spend(bundle, tail, record):
                drawn.append(bundle)
        now[0] += 0.1
    stale = math.log2(600) + 600 / LIVE_STALE_MAX + 1  # redraws beyond the share, at most
    assert meter.sent <= share + stale * LIVE_FORCED_MAX, (meter.sent, share, len(drawn))
    assert drawn, "never redrawn"
    if kind == "tool card":
        assert all("Run the" in b["text/html"] for b in drawn), drawn[-1]["text/html"]
    if kind == "error":  # a failure shows its start
        assert all("Failed: " in b["text/html"] for b in drawn), drawn[-1]["text/html"]


def test_what_the_meter_holds_is_in_the_transcript_text_dropped_too() -> None:
    """`Meter.held` is at least what the transcript holds, never more: text that no part could
    take (the parts cap reached, no message of its kind to join) is dropped, and the fold once
    counted it as kept, so a turn could buy redraws with text it never held (20 tool calls,
    then 100,000 characters of dropped thoughts: 200,000 characters held, 2,700 in the
    transcript; 60,000 of redraws allowed)."""
    from acp_notebook.protocol.fold import SessionFold
    from acp_notebook.protocol.limits import Limits
    from acp_notebook.protocol.turn import finish

    limits = Limits(parts=20)
    fold = SessionFold(limits=limits)
    record = fold.begin_turn("t1", [])
    for i in range(30):
        call = {"toolCallId": f"c{i}", "title": "x", "kind": "read", "status": "completed"}
        fold.apply({"sessionUpdate": "tool_call", **call})
    for _ in range(100):
        thought = {"type": "text", "text": "t" * 1_000}
        fold.apply({"sessionUpdate": "agent_thought_chunk", "content": thought})
    held = Meter(limits).held(record)
    ended = fold.end_turn()
    assert ended is not None and ended.dropped["text_chars"] == 100_000
    result = finish(
        ended, stop_reason="end_turn", error=None, usage=None, session_id="s", agent="a"
    )
    assert held <= len(json.dumps(result.to_json())), held


def test_a_redraw_does_not_draw_the_thoughts_or_plan_it_left_out() -> None:
    """A turn that thinks and plans first, then calls tools: a redraw leaves its first parts
    out, and the turn's top-level thoughts and plan (the parts' own, joined) stood in for them,
    whole: 120,000 characters of HTML for a tail of 2,000 (a turn's thoughts may be 4 MB)."""
    thoughts = "Let me think. " * 8_000
    steps = [{"content": "a step " * 100, "priority": "high", "status": "pending"}] * 50
    first = [
        {"type": "message", "id": "m0", "role": "thought", "text": thoughts},
        {"type": "plan", "id": "p0", "entries": steps},
    ]
    calls = [{**_tool(i), "type": "tool_call", "id": f"c{i}"} for i in range(100)]
    turn = {"turnId": "t1", "parts": first + calls, "text": "", "thoughts": thoughts}
    bundle = publish.turn({**turn, "plan": steps}, live=True, formats=LIVE_FORMATS, tail=2_000)
    assert chars(bundle) < 4 * 2_000, {k: len(v) for k, v in bundle.items()}
    assert "Let me think" not in bundle["text/html"] and "a step" not in bundle["text/html"]


# -- in a kernel, through nbclient (a front-end without widgets) -------------------------------


def _tool_steps(i: int) -> list[dict[str, Any]]:
    return [{"update": _tool(i)}, {"say": f"Read file {i}. "}, {"sleep": 0.03}]


def _sent_and_transcript(client: Any, index: int, nb: Any) -> tuple[list[str], int, int]:
    """The live display's messages of cell `index` (text/plain of each, in order), every
    character they and the record sent, and the transcript's size."""
    sent, shown, view = 0, [], None
    for i, msg in client.messages:
        if i != index or msg["msg_type"] not in ("display_data", "update_display_data"):
            continue
        display_id = (msg["content"].get("transient") or {}).get("display_id")
        if view is None and display_id and MIME_TURN not in msg["content"]["data"]:
            view = display_id
        if display_id is None or display_id != view:
            continue
        data = msg["content"]["data"]
        sent += sum(len(v) if isinstance(v, str) else len(json.dumps(v)) for v in data.values())
        shown.append(data.get("text/plain", ""))
    record = next(o["data"] for o in nb.cells[index].outputs if MIME_TURN in o.get("data", {}))
    transcript = len(json.dumps(TurnResult.from_json(record[MIME_TURN]).to_json()))
    return shown, sent, transcript


def _last_chunk(text: str, size: int) -> int:
    """The index of the last chunk a redraw shows (chunks are their index, zero-padded)."""
    runs = [r for r in re.findall(r"\d+", text) if len(r) >= size]
    return int(runs[-1][-size:]) if runs else -1


def _paced_by_the_view(
    tmp_path: Path, index: int, batches: int, chunks: int, size: int
) -> tuple[list[dict[str, Any]], Callable[[int, dict[str, Any]], None]]:
    """A slow answer in `batches` of `chunks` chunks, the agent waiting after each until the
    view of cell `index` has redrawn within `GAP` characters of what it was sent (a FIFO the
    test opens then): the steps, and the hook that watches the view's messages.

    Whatever the machine's load, a view that folded a batch's last chunk has drawn its newest
    text within `GAP` of it: each fold offers a redraw, which waits only while less than `GAP`
    arrived since the last (chunks folded at once pay for a larger one). A frozen view never
    does: its agent gives up waiting (`timeout`), and the turn fails."""
    fifos = [tmp_path / f"batch{b}" for b in range(batches)]
    steps: list[dict[str, Any]] = []
    for b, fifo in enumerate(fifos):
        os.mkfifo(fifo)
        steps.append({"chunks": chunks, "size": size, "every": 0.03, "first": b * chunks})
        steps.append({"wait_fifo": str(fifo), "timeout": 60})
    released: set[int] = set()

    def release(fifo: Path) -> None:
        with open(fifo, "wb"):  # blocks until the agent waits on it
            pass

    def on_message(cell: int, msg: dict[str, Any]) -> None:
        if cell != index or msg["msg_type"] != "update_display_data":
            return
        drawn = (_last_chunk(msg["content"]["data"].get("text/plain", ""), size) + 1) * size
        for b, fifo in enumerate(fifos):
            if b not in released and drawn >= (b + 1) * chunks * size - GAP:
                released.add(b)
                threading.Thread(target=release, args=(fifo,), daemon=True).start()

    return steps, on_message


def test_a_slow_and_a_fast_turn_send_under_twice_their_transcript(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    """A slow answer (chunks of 50 characters, 1,700 a second, in five pauses), a fast long one
    (400,000 characters in bursts over a second or two) and one of 100 tool calls (3 s): the live
    display and the record send at most 2 times the transcript (1.7, 1.8 and 1.65 times; 90,
    2.5 and 18.6 times before), and all three are redrawn. The slow one is redrawn with its
    newest text, within `GAP`, at each of its pauses (see `_paced_by_the_view`: no bound on the
    kernel's pace). A tiny one is not redrawn."""
    size, batches, chunks = 50, 5, 80  # 20,000 characters, 4,000 a batch: more than GAP
    slow, on_message = _paced_by_the_view(tmp_path, 0, batches, chunks, size)
    cells = [
        f"%%agent --agent {scripted()}\n" + script(*slow),
        f"%%agent --agent {scripted()}\n"
        + script(*[{"chunks": 2_000, "size": 20}, {"sleep": 0.1}] * 10),
        f"%%agent --agent {scripted()}\nhi",
        f"%%agent --agent {scripted()}\n"
        + script(*(s for i in range(100) for s in _tool_steps(i))),  # 150,000 characters, 3 s
    ]
    clients: list[Any] = []
    nb = execute(
        cells, tmp_path, client_out=clients, kernel=kernel, timeout=90, on_message=on_message
    )
    for index in (0, 1, 3):
        shown, sent, transcript = _sent_and_transcript(clients[0], index, nb)
        assert sent <= 2 * transcript, (index, sent, transcript, len(shown))
        assert len(shown) >= 4, (index, len(shown))  # the first display, redraws, the record
    # The tiny answer: its first display and its record (about 2 times its 400 characters of
    # transcript, kept as they are), no redraw: the share of so little pays for none.
    shown, sent, transcript = _sent_and_transcript(clients[0], 2, nb)
    assert len(shown) == 2, shown
    # The slow answer went on after each pause: its view had caught up every time.
    record = next(o["data"] for o in nb.cells[0].outputs if MIME_TURN in o.get("data", {}))
    result = TurnResult.from_json(record[MIME_TURN])
    assert result.success and len(result.text) == batches * chunks * size, result.errors
    shown, _, _ = _sent_and_transcript(clients[0], 0, nb)
    held = [(_last_chunk(t, size) + 1) * size for t in shown[1:-1]]  # the redraws
    assert len(held) >= batches and held == sorted(held), held


def test_a_long_card_touched_for_seconds_is_not_redrawn_whole(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    """In a kernel: a tool card of ten 20,000-character outputs, its title touched ten times a
    second for 6 s. Its live updates sent 1.0 MB, the card whole at 1 and 3 s (2.5 times the
    transcript before the record); now its stand-in (the card without its output)."""
    outputs = [
        {"type": "content", "content": {"type": "text", "text": "<a> " * 5_000}} for _ in range(10)
    ]
    call = {"toolCallId": "c1", "title": "Run", "kind": "execute", "status": "in_progress"}
    steps: list[dict[str, Any]] = [
        {"update": {"sessionUpdate": "tool_call", **call, "content": outputs}}
    ]
    for i in range(60):
        touch = {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "title": f"Run {i}"}
        steps += [{"update": touch}, {"sleep": 0.1}]
    clients: list[Any] = []
    cells = [f"%%agent --agent {scripted()}\n" + script(*steps)]
    nb = execute(cells, tmp_path, client_out=clients, kernel=kernel, timeout=90)
    shown, _, transcript = _sent_and_transcript(clients[0], 0, nb)
    live = [
        sum(
            len(v) if isinstance(v, str) else len(json.dumps(v))
            for v in m["content"]["data"].values()
        )
        for i, m in clients[0].messages
        if i == 0 and m["msg_type"] in ("display_data", "update_display_data")
    ][:-1]  # less the record
    assert len(shown) >= 3, len(shown)  # redrawn while it ran
    stale = math.log2(6) + 1
    assert sum(live) <= LIVE_SHARE * transcript + stale * LIVE_FORCED_MAX, (live, transcript)
    assert any("Run " in text for text in shown[1:-1]), shown
