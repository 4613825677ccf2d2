"""A hostile agent cannot make the client keep without bound, nor hand it numbers JSON cannot hold.

Issue 7, items 9 and 10. The fold is tested directly where that suffices (memory with tracemalloc,
no sleeps); the routing, the paging and the reader through the scripted agent, whose `flood`,
`plan_entries` and `after_turn` steps generate the floods in the agent (the tests ship no
megabytes); the saved notebook through nbclient.
"""

from __future__ import annotations

import gc
import json
import math
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_notebook.protocol import jsonrpc as rpc
from acp_notebook.protocol.fold import SessionFold
from acp_notebook.protocol.limits import BoundedRepr, Limits, bounded, token_counts
from acp_notebook.protocol.mutations import SessionChanged
from acp_notebook.protocol.state import ErrorPart, RawPart, ToolCallPart
from acp_notebook.protocol.turn import TurnRecord, finish
from tests.agents.script import script
from tests.client_helpers import Agent, Watcher, run_script
from tests.nb_util import answer, execute, scripted, transcripts
from tests.shared_kernel import SharedKernel

# The agent runs in this process (no spawn per test) unless a test needs a real process.
pytestmark = [pytest.mark.anyio, pytest.mark.scripted_agent("in_process")]


def chunk(text: str, kind: str = "agent_message_chunk") -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def in_turn(limits: Limits | None = None) -> SessionFold:
    fold = SessionFold(limits=limits) if limits else SessionFold()
    fold.begin_turn("t1", [])
    return fold


def ended(fold: SessionFold) -> TurnRecord:
    record = fold.end_turn()
    assert record is not None
    return record


def saved(record: TurnRecord) -> str:
    """The transcript as a notebook holds it: strict JSON (no NaN), or this raises."""
    result = finish(
        record, stop_reason="end_turn", error=None, usage=None, session_id="s", agent="a"
    )
    return json.dumps(result.to_json(), allow_nan=False)


def note(record: TurnRecord) -> str:
    first = record.parts[0]
    assert isinstance(first, ErrorPart) and first.level == "warning"
    return first.message


# -- item 9: caps, in the fold ---------------------------------------------------------------------


def test_a_plan_of_100000_entries_keeps_1000_and_says_so() -> None:
    fold = in_turn()
    entries = [
        {"content": f"step {i}", "priority": "low", "status": "pending"} for i in range(100_000)
    ]
    fold.apply({"sessionUpdate": "plan", "entries": entries})
    fold.apply({"sessionUpdate": "plan", "entries": entries})  # a snapshot: not counted twice
    record = ended(fold)
    assert record.plan is not None and len(record.plan.entries) == 1_000
    assert record.plan.entries[-1].content == "step 999"
    assert record.dropped == {"plan_entries": 99_000}
    assert "99,000 plan entries past the 1,000-entry limit" in note(record)
    assert json.loads(saved(record))["dropped"] == {"plan_entries": 99_000}
    assert len(saved(record)) < 200_000  # was 58 MB as a notebook


def test_alternating_chunks_keep_memory_near_the_text_size() -> None:
    # Each alternation between thought and answer used to be a new part (about 420 bytes each):
    # 1,000,000 one-character chunks kept 500 MB. Past the parts cap the text joins the last
    # message of its kind: all of it is kept, in a bounded number of parts.
    n = 200_000
    updates = [chunk("a"), chunk("t", "agent_thought_chunk")]
    gc.collect()
    tracemalloc.start()
    try:
        fold = in_turn()
        for i in range(n):
            fold.apply(updates[i & 1])
        record = ended(fold)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(record.parts) == 5_000 + 1  # the cap, and the note
    assert sum(len(m.text) for m in record.messages("agent")) == n // 2  # no text lost
    assert sum(len(m.text) for m in record.messages("thought")) == n // 2
    # Parts not created (a chunk that continues the very last part is no new part).
    assert record.dropped == {"parts": (n - 5_000) // 2}
    assert kept < 3_500_000, f"kept {kept:,} bytes for {n:,} bytes of text"  # main: 85 MB


def test_text_past_the_turn_limit_is_cut_and_counted() -> None:
    fold = in_turn(Limits(text_chars=1_000))
    for _ in range(30):
        fold.apply(chunk("x" * 100))
    fold.apply(chunk("y" * 50, "agent_thought_chunk"))
    record = ended(fold)
    assert len(record.joined("agent")) == 1_000
    assert record.joined("thought") == ""
    assert record.dropped == {"text_chars": 2_050}
    assert "2,050 characters of text past the 1,000-character limit" in note(record)


def test_the_default_text_limit_holds_one_huge_chunk() -> None:
    fold = in_turn()
    fold.apply(chunk("z" * (5 * 1024 * 1024)))
    record = ended(fold)
    assert len(record.joined("agent")) == 4 * 1024 * 1024
    assert record.dropped == {"text_chars": 1024 * 1024}


def tool_call(i: int, **fields: Any) -> dict[str, Any]:
    return {"sessionUpdate": "tool_call", "toolCallId": f"c{i}", "title": f"call {i}", **fields}


def test_tool_calls_past_the_limit_are_dropped_and_counted() -> None:
    fold = in_turn(Limits(tool_calls=10))
    for i in range(50):
        fold.apply(tool_call(i))
        fold.apply(
            {"sessionUpdate": "tool_call_update", "toolCallId": f"c{i}", "status": "completed"}
        )
    permission = fold.add_permission({"toolCallId": "c99", "title": "late"}, [])
    record = ended(fold)
    assert len(record.tool_calls) == 10 and list(record.tool_calls)[-1] == "c9"
    assert all(call.status == "completed" for call in record.tool_calls.values())
    assert record.dropped == {"tool_calls": 81}  # 80 updates and the permission's call
    assert permission in record.parts  # the request itself is still recorded


def test_content_items_diffs_and_values_are_bounded() -> None:
    fold = in_turn()
    items = [
        {"type": "content", "content": {"type": "text", "text": f"item {i}"}} for i in range(1_000)
    ]
    fold.apply(tool_call(1, content=items))
    big_diff = {
        "type": "diff",
        "path": "/w/big.txt",
        "oldText": "a" * 3_000_000,
        "newText": "b" * 3_000_000,
    }
    fold.apply(tool_call(2, content=[big_diff], rawInput={"text": "i" * 3_000_000}))
    record = ended(fold)
    first, second = record.tool_calls["c1"], record.tool_calls["c2"]
    assert len(first.content) == 100 and first.content[-1]["content"]["text"] == "item 99"
    assert second.content[0]["type"] == "content"
    assert "was left out: 6,000,000 characters" in second.content[0]["content"]["text"]
    assert len(json.dumps(second.raw_input)) < 1_100_000
    assert "characters dropped" in second.raw_input["text"]
    assert record.dropped["content_items"] == 900
    assert record.dropped["diffs"] == 1
    assert record.dropped["value_chars"] > 1_900_000
    assert len(saved(record)) < 2_000_000


def test_a_turn_budget_bounds_many_calls_each_under_the_value_limit() -> None:
    fold = in_turn(Limits(turn_chars=100_000, value_chars=20_000))
    for i in range(20):
        fold.apply(tool_call(i, rawInput={"text": "r" * 15_000}))
    # A call whose content is replaced gives its old size back: streaming input is no leak.
    for size in range(100):
        fold.apply(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "c0",
                "rawInput": {"text": "s" * (size * 100)},
            }
        )
    record = ended(fold)
    kept = [c for c in record.tool_calls.values() if c.raw_input is not None]
    assert 5 <= len(kept) <= 7
    assert record.tool_calls["c0"].raw_input == {"text": "s" * 9_900}
    assert record.dropped["turn_chars"] > 200_000
    assert sum(c.size for c in record.tool_calls.values()) <= 100_000


def test_the_turn_budget_bounds_the_agents_requests_live_and_replayed() -> None:
    """Permission requests, each under the value limit, are charged to the turn's characters
    as tool calls are (they were kept outside it: 5,000 of a megabyte each, kept whole); a
    recorded elicitation's message is read as a live one is (at most `MAX_TEXT` characters,
    it kept a megabyte), and a URL no live one could have is dropped."""
    from acp_notebook.protocol.elicitation import MAX_TEXT, ElicitationPart
    from acp_notebook.protocol.refold import refold
    from acp_notebook.protocol.state import PermissionPart

    limits = Limits(turn_chars=100_000, value_chars=20_000)
    fold = in_turn(limits)
    option = {"optionId": "ok", "name": "n" * 15_000, "kind": "allow_once"}
    asked = [fold.add_permission({"toolCallId": f"c{i}"}, [option]) for i in range(20)]
    record = ended(fold)
    kept = [p for p in record.parts if isinstance(p, PermissionPart)]
    assert 5 <= len(kept) < 20 and all(p in asked for p in kept)
    assert sum(len(json.dumps(p.to_json())) for p in kept) <= 100_000
    assert record.dropped["permissions"] == 20 - len(kept)
    recording = {
        "parts": [
            *(p.to_json() for p in asked),
            *(
                {
                    "type": "elicitation",
                    "id": f"e{i}",
                    "mode": "url",
                    "message": "m" * 30_000,
                    "url": "https://example.com/" + "u" * 30_000,
                }
                for i in range(20)
            ),
        ]
    }
    replayed = refold(recording, limits)
    shown = [p for p in replayed.parts if isinstance(p, PermissionPart | ElicitationPart)]
    assert sum(len(json.dumps(p.to_json())) for p in shown) <= 100_000
    elicitations = [p for p in shown if isinstance(p, ElicitationPart)]
    assert elicitations and all(len(p.message) == MAX_TEXT and not p.url for p in elicitations)


def test_unknown_updates_and_errors_past_the_parts_limit_are_counted() -> None:
    fold = in_turn(Limits(parts=10))
    for i in range(100):
        fold.apply({"sessionUpdate": "from_the_future", "n": i})
    for _ in range(5):
        fold.add_error("protocol error")
    record = ended(fold)
    assert len([p for p in record.parts if isinstance(p, RawPart)]) == 10
    assert record.dropped == {"unknown_updates": 90, "errors": 5}


def test_updates_outside_any_turn_are_kept_only_to_a_bound() -> None:
    # A turn's end used to leave the agent free to fill `ambient` for ever (200 MB kept).
    fold = SessionFold()
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(3_000):
            fold.apply(chunk("x" * 1_000) if i % 3 else tool_call(i, rawInput="y" * 10_000))
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    ambient = fold.ambient
    assert sum(len(m.text) for m in ambient.messages("agent")) == 1024 * 1024
    assert ambient.dropped["text_chars"] > 900_000
    assert kept < 12_000_000, f"kept {kept:,} bytes"  # main: 22 MB here, and no bound
    fold.begin_turn("t1", [])
    fold.apply(chunk("the next turn has its own budget"))
    assert ended(fold).joined("agent") == "the next turn has its own budget"


def test_a_replay_shares_one_budget() -> None:
    fold = SessionFold(limits=Limits(parts=100))
    fold.begin_replay()
    for i in range(500):
        fold.apply(chunk(f"question {i}", "user_message_chunk"))
        fold.apply(chunk(f"answer {i}"))
    fold.end_replay()
    assert sum(len(r.parts) for r in fold.history) <= 100 + len(fold.history)
    assert len(fold.history) <= 100


def test_session_wide_lists_are_bounded() -> None:
    fold = SessionFold()
    commands = [{"name": f"c{i}", "description": "d"} for i in range(50_000)]
    fold.apply({"sessionUpdate": "available_commands_update", "availableCommands": commands})
    fold.apply({"sessionUpdate": "session_info_update", "title": "t" * 5_000_000})
    fold.facts.set_config_options([{"id": f"o{i}"} for i in range(50_000)])
    assert len(fold.facts.commands) == 1_000
    assert len(fold.facts.config_options) == 1_000
    assert len(fold.facts.info["title"]) < 1_100_000


# -- item 10: values -------------------------------------------------------------------------------


def test_the_reader_turns_non_finite_and_huge_numbers_into_null() -> None:
    line = (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":'
        '{"a":NaN,"b":Infinity,"c":-Infinity,"d":1e999,"e":123456789012345678901234567890,'
        '"f":1.5,"g":-9223372036854775808,"h":9223372036854775808,"i":' + "9" * 5000 + "}}}"
    )
    frame = rpc.decode(line.encode())
    assert isinstance(frame, rpc.Notification)
    update = frame.params["update"]
    assert update == {
        "a": None,
        "b": None,
        "c": None,
        "d": None,
        "e": None,
        "f": 1.5,
        "g": -(2**63),
        "h": None,
        "i": None,
    }
    assert rpc.loads('{"x": NaN}') == {"x": None}


def test_usage_numbers_that_are_no_usage_are_refused_and_kept_as_raw() -> None:
    fold = in_turn()
    fold.apply(
        {
            "sessionUpdate": "usage_update",
            "used": 10,
            "size": 100,
            "cost": {"amount": 0.5, "currency": "USD"},
        }
    )
    good = fold.facts.usage
    bad = [
        {"used": 2**64, "size": 100},
        {"used": -5, "size": 100},
        {"used": 1, "size": 10**30},
        {"used": None, "size": 100},
        {"used": 1, "size": 100, "cost": {"amount": -1.0, "currency": "USD"}},
        {"used": 1, "size": 100, "cost": {"amount": 1e300, "currency": "USD"}},
    ]
    for fields in bad:
        fold.apply({"sessionUpdate": "usage_update", **fields})
    assert fold.facts.usage is good  # unchanged
    assert good is not None and good.fraction == 0.1
    record = ended(fold)
    raws = [p for p in record.parts if isinstance(p, RawPart)]
    assert len(raws) == len(bad)
    assert all(r.problem and "invalid" in r.problem for r in raws)
    saved(record)


def test_token_counts_keep_only_counts() -> None:
    limits = Limits()
    assert token_counts(
        {"inputTokens": 5, "outputTokens": -3, "cachedReadTokens": 1.5, "totalTokens": 2**70},
        limits,
    ) == {"inputTokens": 5, "outputTokens": None, "cachedReadTokens": None, "totalTokens": None}
    assert token_counts("lots", limits) is None


def test_values_kept_by_the_fold_are_finite_json() -> None:
    # The fold gets its input from the reader, but guards itself too.
    fold = in_turn()
    fold.apply(tool_call(1, rawInput={"x": math.nan, "y": [math.inf, 2**100]}))
    fold.apply({"sessionUpdate": "mystery", "z": -math.inf})
    record = ended(fold)
    assert record.tool_calls["c1"].raw_input == {"x": None, "y": [None, None]}
    saved(record)
    assert bounded({"ok": [1, 2.5, "s"]}, 100) == ({"ok": [1, 2.5, "s"]}, 0)


# -- through the client ----------------------------------------------------------------------------


async def test_alternating_chunks_through_the_client_stay_in_bounded_parts(agent: Agent) -> None:
    async with agent.session(bound=50) as session:
        result = await run_script(
            session,
            {
                "flood": [chunk("a"), chunk("t", "agent_thought_chunk")],
                "times": 100_000,
            },
            {"say": "END"},
        )
    assert result.success, result.error
    assert len(result.parts) == 5_001
    assert result.text.replace("\n", "").endswith("aEND")  # nothing lost, END joined last
    assert result.to_json()["dropped"] == {"parts": 95_000 // 2 + 1}  # the agent chunks


async def test_updates_after_the_turn_are_bounded(agent: Agent) -> None:
    with anyio.fail_after(50):
        async with agent.client() as client:
            session = await client.new_session()
            watcher = Watcher(session)
            result = await run_script(
                session,
                {"say": "answer"},
                {
                    "after_turn": [
                        # A round trip first: the client has ended the turn.
                        {
                            "request": "fs/read_text_file",
                            "quiet": True,
                            "params": {"path": str(agent.cwd / "missing.txt")},
                        },
                        {"flood": [chunk("x" * 1000)], "times": 5_000},
                        {
                            "update": {
                                "sessionUpdate": "session_info_update",
                                "title": "flooded",
                            }
                        },
                    ]
                },
            )
            await watcher.wait_for(
                lambda m: (
                    isinstance(m, SessionChanged)
                    and m.field == "info"
                    and session.title == "flooded"
                )
            )
            ambient = session.ambient
            assert result.text == "answer"
            assert len(ambient.joined("agent")) == 1024 * 1024
            assert ambient.dropped == {"text_chars": 5_000_000 - 1024 * 1024}


async def test_updates_for_unknown_sessions_are_dropped_never_buffered(agent: Agent) -> None:
    with anyio.fail_after(50):
        async with agent.client() as client:
            session = await client.new_session()
            result = await run_script(
                session,
                {
                    "flood": [
                        {
                            "sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": "boo" * 100},
                        }
                    ],
                    "times": 50_000,
                    "session_id": "made-up",
                },
                {"flood": [chunk("x")], "times": 10, "session_id": "made-up-2"},
                {"say": "done"},
            )
            assert result.text == "done"
            assert client.dropped_updates == 50_010
            assert not client.registry.held()


@pytest.mark.parametrize("mode", ["empty", "repeat", "fresh"])
async def test_endless_session_list_paging_stops(agent: Agent, mode: str) -> None:
    with anyio.fail_after(50):
        async with agent.client("--list", "--list-endless", mode) as client:
            listed = await client.list_sessions(limit=10**9)
    pages = len(agent.sent("session/list"))
    if mode == "empty":
        assert listed == [] and pages == 1  # an empty page with a cursor ends it
    elif mode == "repeat":
        assert len(listed) == 2 and pages == 2  # the same cursor again ends it
    else:
        assert len(listed) == 100 and pages == 100  # the page cap


async def test_nan_from_the_agent_reaches_no_transcript(agent: Agent) -> None:
    async with agent.session(bound=50) as session:
        sid = session.id
        raw = (
            '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"'
            + sid
            + '","update":{"sessionUpdate":"tool_call","toolCallId":"c1","title":"t",'
            '"rawInput":{"n":NaN,"big":1e999}}}}'
        )
        usage = (
            '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"'
            + sid
            + '","update":{"sessionUpdate":"usage_update","used":'
            + "9" * 400
            + ',"size":100}}}'
        )
        result = await run_script(session, {"raw": raw}, {"raw": usage}, {"say": "ok"})
        assert session.usage is None
    (call,) = result.tool_calls
    assert isinstance(call, ToolCallPart) and call.raw_input == {"n": None, "big": None}
    assert any(p.problem and "used" in p.problem for p in result.unknown_updates)
    json.dumps(result.to_json(), allow_nan=False)


# -- the saved notebook ----------------------------------------------------------------------------


def test_a_100000_entry_plan_saves_a_small_notebook(tmp_path: Path, kernel: SharedKernel) -> None:
    nb = execute(
        [f"%%agent --agent {scripted()}\n" + script({"plan_entries": 100_000}, {"say": "planned"})],
        tmp_path,
        timeout=100,
        kernel=kernel,
    )
    size = (tmp_path / "executed.ipynb").stat().st_size
    assert size < 1_000_000, f"{size:,} bytes"  # was 58 MB; 0.47 MB
    (transcript,) = transcripts(nb.cells[0])
    assert len(transcript["plan"]) == 1_000
    assert transcript["dropped"] == {"plan_entries": 99_000}
    assert answer(transcript) == "planned"


# -- the agent's errors and ids --------------------------------------------------------------------


def test_an_error_answer_keeps_an_excerpt_of_a_huge_message() -> None:
    line = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {"code": -32603, "message": "m" * 5_000_000, "data": ["d" * 1000] * 1000},
        }
    )
    frame = rpc.decode(line.encode())
    assert isinstance(frame, rpc.Response) and frame.error is not None
    assert len(frame.error["message"]) < 4_100 and "5000000 chars" in frame.error["message"]
    assert len(json.dumps(frame.error["data"])) < 70_000
    assert frame.error["code"] == -32603


async def test_a_huge_unknown_response_id_is_quoted_as_an_excerpt(agent: Agent) -> None:
    async with agent.session(bound=50) as session:
        result = await run_script(session, {"respond_id": "i" * 100_000}, {"say": "ok"})
    (error,) = result.errors
    assert "unknown or already answered request id" in error and len(error) < 1_000


def test_one_bounded_repr_serves_the_views_the_dump_and_the_kernel_tools() -> None:
    """`BoundedRepr` is the one reprlib setup: the views' values, a dumped non-JSON value and
    the kernel tools' reprs all show a big set without sorting it whole, and an int past
    Python's 4,300-digit `str()` limit is said, where it used to raise (the kernel tools showed
    "<repr failed: ValueError …>", the dump only the value's type)."""
    from acp_notebook.display import views
    from acp_notebook.kernel_tools.variables import bounded_repr
    from acp_notebook.render.clip import dump
    from tests.blocking import CountedKey

    huge = 10**5000
    assert BoundedRepr(100).repr(huge) == "<int of about 5,001 digits>"
    assert bounded_repr([huge]) == "[<int of about 5,001 digits>]"
    assert dump([huge]).text == "[<int of about 5,001 digits>]"
    assert views.text([huge]) == "[about 10^5000]"  # the views' own way with numbers
    CountedKey.compared = 0
    keys = set(map(CountedKey, range(50_000)))
    for text in (views.text(keys), dump(keys).text, bounded_repr(keys, 200)):
        assert "k" in text and "..." in text
    assert CountedKey.compared == 0, f"{CountedKey.compared} comparisons to show a few items"


def test_a_view_caps_the_shape_of_what_it_shows_with_the_same_bounded() -> None:
    """`%agent log` shows each message through `bounded` with a shape: strings and keys cut,
    lists and objects cut with a note of how many more, deep nesting elided; all of it counted
    as left out. Without a shape a value within budget is returned as it is."""
    value = {"k" * 300: 1, "s": "x" * 500, "l": list(range(30)), "d": [[[["deep"]]]]}
    shown, dropped = bounded(value, 10_000, string=200, items=3, depth=3)
    assert shown == {
        "k" * 200: 1,
        "s": "x" * 200 + "… [300 characters dropped]",
        "l": [0, 1, 2, "… 27 more"],
        "…": "1 more",
    }
    assert dropped > 300
    assert bounded(value, 10_000, depth=3)[0]["d"] == [["…"]]
    assert bounded(value, 10_000)[0] is value
