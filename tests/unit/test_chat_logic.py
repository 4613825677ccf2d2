"""The chat's logic without a browser: the `@` file listing (bounds, skipped folders,
confinement), the mode and config menus (what is offered, a choice sent, a refusal shown), the
commands offered to `/`, and the static record."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from acp_notebook.chat.input import list_files, resolve_in
from acp_notebook.chat.pickers import ChatPickers, pickers
from acp_notebook.chat.record import MIME_CHAT, chat_record, chat_turns, saved_turn
from acp_notebook.errors import PromptError
from acp_notebook.protocol.turn import read_turn
from acp_notebook.render import render_html
from acp_notebook.render.style import RECORD_CSS
from acp_notebook.widgets.loop import KernelLoop

MODES = [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]
MODEL = {
    "id": "model",
    "name": "Model",
    "category": "model",
    "type": "select",
    "currentValue": "b",
    "options": [
        {"value": "a", "name": "Model A"},
        {"group": "more", "name": "More", "options": [{"value": "b", "name": "Model B"}]},
    ],
}


def test_listing_is_bounded_and_skips_hidden_heavy_folders_and_links(tmp_path: Path) -> None:
    (tmp_path / "top.txt").write_text("x")
    for skipped in (".git", ".venv", "node_modules", "__pycache__"):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "inside.txt").write_text("x")
    (tmp_path / ".hidden.txt").write_text("x")
    deep = tmp_path.joinpath(*"abcdefgh")
    deep.mkdir(parents=True)
    (deep / "deep.txt").write_text("x")
    (tmp_path / "a" / "shallow.txt").write_text("x")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("x")
    os.symlink(outside, tmp_path / "link")
    os.symlink(outside / "secret.txt", tmp_path / "secret-link.txt")

    files = list_files(tmp_path, depth=4)
    assert files == ["top.txt", "a/shallow.txt"]  # shallow first; nothing hidden, heavy, linked
    many = tmp_path / "many"
    many.mkdir()
    for i in range(50):
        (many / f"f{i:02}.txt").write_text("x")
    assert len(list_files(tmp_path, limit=10)) == 10
    assert list_files(tmp_path, limit=10)[0] == "top.txt"


def test_a_chosen_path_is_confined_to_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "ok.txt").write_text("x")
    outside = tmp_path.parent / f"{tmp_path.name}-out.txt"
    outside.write_text("secret")
    os.symlink(outside, tmp_path / "escape.txt")
    assert resolve_in(tmp_path, "sub/ok.txt") == tmp_path / "sub" / "ok.txt"
    # Names only: a link out (escape.txt), a folder, a missing file are refused where the file
    # is read, on the descriptor read (tests/hostile/test_attack_attach.py).
    assert resolve_in(tmp_path, "escape.txt") == tmp_path / "escape.txt"
    for bad in (
        "../" + outside.name,
        "sub/../../" + outside.name,
        str(outside),
        "",
        "a\x00b",
        "x" * 5000,
    ):
        with pytest.raises(PromptError):
            resolve_in(tmp_path, bad)


def test_menus_are_offered_only_for_what_the_agent_offers() -> None:
    assert pickers([], None, []) == []
    menus = pickers(MODES, "code", [MODEL, {"id": "fast", "type": "boolean", "currentValue": 1}])
    assert [(m.key, m.label, m.value) for m in menus] == [
        ("mode", "Mode", "code"),
        ("config:model", "Model", "b"),
    ]
    assert menus[1].choices == (("Model A", "a"), ("Model B", "b"))  # a group flattened
    # A current value the agent does not list, and hostile shapes, do not break the menu.
    odd = pickers([{"id": 3}, "x", {"id": "only"}], "gone", [{"id": "m", "options": "no"}])
    assert [(m.key, m.value) for m in odd] == [("mode", "only")]


class FakeSession:
    """What ChatPickers reads and calls of a session."""

    def __init__(self) -> None:
        self.modes = MODES
        self.mode: str | None = "code"
        self.config_options: list[dict[str, Any]] = [dict(MODEL)]
        self.calls: list[tuple[str, str]] = []
        self.refuse = False
        self.answered = asyncio.Queue[str]()  # one item per call, once it returned or failed

    async def set_mode(self, mode_id: str) -> None:
        self.calls.append(("mode", mode_id))
        self.answered.put_nowait(mode_id)
        if self.refuse:
            raise RuntimeError("the agent said no")
        self.mode = mode_id

    async def set_config_option(self, config_id: str, value: str) -> list[dict[str, Any]]:
        self.calls.append((config_id, value))
        self.answered.put_nowait(value)
        self.config_options = [{**MODEL, "currentValue": value}]
        return self.config_options


def test_a_choice_goes_to_the_agent_and_a_refusal_is_shown() -> None:
    async def main() -> tuple[FakeSession, ChatPickers, list[str]]:
        session = FakeSession()
        reports: list[str] = []
        reported = asyncio.Event()
        menus = ChatPickers(  # type: ignore[arg-type]
            session, KernelLoop(), lambda m: (reports.append(m), reported.set())
        )
        assert menus.box.layout.display == "flex" and len(menus.box.children) == 2
        menus.menus["config:model"].value = "a"  # as the page sets it
        menus.menus["mode"].value = "ask"
        for _ in range(2):
            await session.answered.get()
        session.refuse = True
        menus.menus["mode"].value = "code"
        await reported.wait()
        # The agent changed its mode by itself (current_mode_update): the menu follows.
        session.refuse = False
        session.mode = "code"
        menus.refresh()
        return session, menus, reports

    session, menus, reports = asyncio.run(main())
    assert session.calls == [("model", "a"), ("mode", "ask"), ("mode", "code")]
    assert "the agent said no" in reports[0] and "mode" in reports[0]
    assert menus.menus["mode"].value == "code" and menus.menus["config:model"].value == "a"
    assert session.calls[-1] == ("mode", "code")  # refresh() sent nothing to the agent


def test_no_menu_without_modes_or_options() -> None:
    session = FakeSession()
    session.modes, session.config_options = [], []
    menus = ChatPickers(session, KernelLoop(), print)  # type: ignore[arg-type]
    assert menus.box.layout.display == "none" and not menus.box.children


def test_the_record_has_each_user_message_once_and_one_stylesheet() -> None:
    from acp_notebook.chat.turns import user_part
    from acp_notebook.display import publish

    turns = []
    for i, said in enumerate(["first $5 <b>", "second"]):
        transcript = {
            "turn_id": f"t{i}",
            "parts": [
                user_part([{"type": "text", "text": said}], "."),
                {"type": "message", "id": "m", "role": "agent", "text": f"answer {i}"},
            ],
            "stop_reason": "end_turn",
        }
        turns.append(publish.turn(transcript))
    record = chat_record(turns)
    html = record["text/html"]
    assert html.count("<style>") == 1 and "answer 0" in html and "answer 1" in html
    assert "<b>" not in html and "first $5 &lt;b&gt;" in html
    assert "You: first $5 <b>" in record["text/plain"] and "answer 1" in record["text/plain"]
    # Lean: no Markdown copy beside the HTML and text, the record's stylesheet once for all
    # turns (in the one <style>), not the live view's.
    assert "text/markdown" not in record and html.count(RECORD_CSS) == 1
    assert ".acpnb-turn .acpnb-user{" not in html
    assert [t["turn_id"] for t in chat_turns(record[MIME_CHAT])] == ["t0", "t1"]


def chat_transcript(i: int, title: str) -> dict[str, Any]:
    """A chat turn's transcript as the fold writes it, the user's message its first part."""
    from acp_notebook.chat.turns import user_part

    user = user_part([{"type": "text", "text": f"message {i}\nits second line"}], ".")
    return {
        "turnId": f"turn-{i}",
        "agent": "Agent",
        "model": "Model",
        "sessionId": "s-1",
        "title": title,
        "prompt": [{"type": "text", "text": f"message {i}"}],
        "parts": [
            user,
            {
                "type": "message",
                "id": "m1",
                "messageId": "a" * 36,
                "role": "thought",
                "text": "I think",
                "blocks": [],
            },
            {
                "type": "plan",
                "id": "p2",
                "entries": [{"content": "step", "priority": "high", "status": "pending"}],
            },
            {
                "type": "message",
                "id": "m3",
                "messageId": "b" * 36,
                "role": "agent",
                "text": f'## Answer {i}\n\n- a "quoted" item',
                "blocks": [],
            },
        ],
        "plan": [{"content": "step", "priority": "high", "status": "pending"}],
        "success": True,
        "stopReason": "end_turn",
        "error": None,
        "terminals": [],
        "usage": {"used": 10, "size": 100},
        "duration": 1.5,
    }


def test_the_record_keeps_each_transcript_as_a_line_of_json_that_reads_back_whole() -> None:
    """The chat's transcripts are saved as compact JSON strings (nbformat indents a JSON value:
    it was a third of a chat's file), without what a reader rebuilds or has no need of; read
    back (`chat_turns`), each draws as the turn did, and a record saved before (a JSON object a
    turn) still reads."""
    from acp_notebook.display import publish

    transcripts = [chat_transcript(i, "Title" if i < 2 else "Renamed") for i in range(3)]
    record = chat_record([publish.turn(t) for t in transcripts])
    saved = record[MIME_CHAT]["turns"]
    assert all(isinstance(s, str) and "\n" not in s for s in saved)
    assert all(
        '"messageId"' not in s and '"blocks"' not in s and '"prompt":' not in s for s in saved
    )
    # The session's fields once, then only where they change (the title, at the third turn).
    assert [s.count('"sessionId"') for s in saved] == [1, 0, 0]
    assert [s.count('"title"') for s in saved] == [1, 0, 1]
    for form in (record[MIME_CHAT], {"turns": [json.loads(s) for s in saved]}):
        back = chat_turns(form)
        assert [t["title"] for t in back] == ["Title", "Title", "Renamed"]
        assert all(t["sessionId"] == "s-1" and t["agent"] == "Agent" for t in back)
        for old, new in zip(transcripts, back, strict=True):
            assert render_html(read_turn(new)) == render_html(read_turn(old))
    # A record saved before: a JSON object a turn, whole.
    assert chat_turns({"turns": transcripts}) == transcripts
    # A field of the session the turn before had and this one has not: it has none.
    no_model = {k: v for k, v in transcripts[1].items() if k != "model"}
    saved = [saved_turn(transcripts[0]), saved_turn(no_model, transcripts[0])]
    assert [t.get("model") for t in chat_turns({"turns": saved})] == ["Model", None]
    # A turn alone keeps its session's fields.
    assert json.loads(saved_turn(transcripts[1]))["title"] == "Title"


@pytest.mark.parametrize(
    "data",
    [None, [], "x", {"turns": None}, {"turns": "[]"}, {"turns": [1, None, "{", "[1]", "{}"]}],
)
def test_a_saved_chat_record_of_any_shape_reads_as_turns_without_raising(data: Any) -> None:
    turns = chat_turns(data)
    assert all(t == {} for t in turns)
    assert len(turns) == (5 if isinstance(data, dict) and isinstance(data["turns"], list) else 0)


def test_listing_reads_a_bounded_number_of_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acp_notebook.chat import input as chat_files

    for i in range(20):  # many folders holding nothing: the walk still ends early
        (tmp_path / f"d{i:02}").mkdir()
    (tmp_path / "z.txt").write_text("x")
    (tmp_path / "d19" / "late.txt").write_text("x")
    monkeypatch.setattr(chat_files, "FOLDERS", 5)
    assert list_files(tmp_path) == ["z.txt"]
    monkeypatch.setattr(chat_files, "FOLDERS", 100)
    assert list_files(tmp_path) == ["z.txt", "d19/late.txt"]


MODEL_SMART = {
    "id": "model",
    "name": "Model",
    "category": "model",
    "type": "select",
    "currentValue": "smart",
    "options": [{"value": "fast", "name": "Fast"}, {"value": "smart", "name": "Smart"}],
}


@pytest.mark.scripted_agent("in_process")
def test_a_chat_follows_the_agent_and_attaches_workspace_files(agent: Any) -> None:
    from acp_notebook.chat.widget import ChatWidget
    from tests.agents.script import script

    (agent.cwd / "notes.txt").write_text("hello from a file")
    (agent.tmp / "outside.txt").write_text("not yours")
    steps = script(
        {"update": {"sessionUpdate": "current_mode_update", "currentModeId": "code"}},
        {"update": {"sessionUpdate": "config_option_update", "configOptions": [MODEL_SMART]}},
        {
            "update": {
                "sessionUpdate": "available_commands_update",
                "availableCommands": [{"name": "review", "description": "Review <b>it</b>"}],
            }
        },
        {"say": "done"},
    )

    async def main() -> ChatWidget:
        async with agent.client("--modes", "--config-options") as client:
            chat = ChatWidget(await client.new_session())
            assert list(chat.pickers.menus) == ["mode", "config:model"]
            assert chat.pickers.menus["mode"].value == "ask"
            # The agent's own updates move the menus and the commands `/` offers.
            await chat.send(steps, files=["notes.txt"])
            assert chat.pickers.menus["mode"].value == "code"
            assert chat.pickers.menus["config:model"].value == "smart"
            assert [c["name"] for c in chat.input.commands] == ["review"]
            # A choice goes to the agent; one it cannot take is shown, and the menu stays.
            await chat.pickers.choose("mode", "ask")
            await chat.pickers.choose("mode", "nope")
            assert "Could not set mode" in chat.status.value
            assert chat.pickers.menus["mode"].value == "ask"
            # A path out of the workspace is refused before anything is sent.
            with pytest.raises(PromptError):
                await chat.send("read this", files=["../outside.txt"])
            assert await chat.list_files() == ["notes.txt"]
            return chat

    chat = asyncio.run(main())
    sent = agent.sent("session/prompt")
    assert len(sent) == 1  # the refused message never reached the agent
    blocks = sent[0]["params"]["prompt"]
    files = [b for b in blocks if b["type"] in ("resource", "resource_link")]
    assert len(files) == 1 and json_of(files[0]).count("notes.txt") >= 1
    assert [m["params"]["modeId"] for m in agent.sent("session/set_mode")] == ["ask"]
    assert len(chat.records) == 1 and "done" in chat.record()["text/html"]
    # The record names the file by its workspace path: no path of this machine, no copy of it.
    saved = json_of(chat.record())
    assert "notes.txt" in chat.record()["text/html"]
    assert str(agent.cwd) not in saved and "file:" not in saved
    assert "hello from a file" not in saved


def json_of(value: Any) -> str:
    import json

    return json.dumps(value)


def test_a_page_that_keeps_the_record_gets_each_turn_once() -> None:
    from acp_notebook.chat.record import RecordKeeper, join, piece
    from acp_notebook.display import publish

    class Page:
        def __init__(self) -> None:
            self.got: list[dict[str, Any]] = []

        def send(self, message: dict[str, Any]) -> None:
            self.got.append(message)

    def turn(i: int) -> dict[str, Any]:
        said = {"type": "message", "id": "prompt", "role": "user", "text": f"q{i}"}
        answer = {"type": "message", "id": "m", "role": "agent", "text": f"answer {i}"}
        return publish.turn({"turn_id": f"t{i}", "parts": [said, answer]})

    page = Page()
    keeper = RecordKeeper(page)  # type: ignore[arg-type]
    keeper.add(turn(0))  # no page keeps it yet: nothing is sent to one
    assert page.got == []
    for have in ("1", -1, 10**9, None):  # the page is not trusted: a bad count is 0
        keeper.page_keeps(have)
        assert page.got.pop()["from"] == 0
    keeper.page_keeps(1)  # the page holds the one turn: nothing to send
    assert page.got == []
    keeper.add(turn(1))
    (message,) = page.got
    assert message["from"] == 1 and len(message["pieces"]) == 1 and "start" not in message
    # The pieces joined are the record the kernel would have sent whole.
    assert join([piece(turn(0)), piece(turn(1))]) == keeper.bundle()
    assert "answer 1" in keeper.bundle()["text/html"]
    assert keeper.bundle()["text/html"].count("<style>") == 1


@pytest.mark.scripted_agent("in_process")
def test_stop_gives_queued_messages_back_and_a_queued_turns_stop_only_it(agent: Any) -> None:
    from acp_notebook.chat.widget import ChatWidget
    from tests.agents.script import script
    from tests.client_helpers import Watcher, tool_call

    async def main() -> tuple[ChatWidget, list[Any]]:
        async with agent.client() as client:
            session = await client.new_session()
            chat = ChatWidget(session)
            # Each prompt the chat made, once the chat has its turn (send goes on at once).
            prompted: asyncio.Queue[Any] = asyncio.Queue()
            prompt = session.prompt

            async def spied(*args: Any, **kwargs: Any) -> Any:
                turn = await prompt(*args, **kwargs)
                prompted.put_nowait(turn)
                return turn

            session.prompt = spied  # type: ignore[method-assign]
            watcher = Watcher(session)
            slow = script({"update": tool_call("c1")}, {"wait_cancel": True})
            running = asyncio.create_task(chat.send(slow))
            await watcher.tool_call("c1")
            # Two messages while it runs: both join the one queued turn, shown once.
            queued = [asyncio.create_task(chat.send(t)) for t in ("first queued", "then this")]
            assert await prompted.get() is session.running  # the slow turn's prompt
            assert await prompted.get() is await prompted.get()  # one turn for the two
            (waiting,) = [v.turn for v in chat.views.values() if v.turn is not session.running]
            assert len(chat.views) == 2
            chat.input.value = "a draft  "
            # The queued turn's own Stop: it comes back to the box; the running turn goes on.
            await chat.stop(waiting)
            assert chat.input.value == "a draft\n\nfirst queued\n\nthen this"
            done = await asyncio.gather(*queued)
            assert session.running is not None and not session.running.cancel_requested
            assert len(chat.views) == 1 and len(chat.log.children) == 1 and chat.records == []
            # The chat's Stop: the running turn ends cancelled, the only one recorded.
            await chat.stop()
            first = await running
            return chat, [first, *done]

    chat, turns = asyncio.run(main())
    assert turns[0] is not None and turns[0].result.stop_reason == "cancelled"
    assert len(agent.sent("session/prompt")) == 1  # the queued messages never reached the agent
    assert len(chat.records) == 1 and "first queued" not in json_of(chat.record())


@pytest.mark.scripted_agent("in_process")
@pytest.mark.parametrize("stopped_turn_ended", [True, False], ids=["turn-ended", "turn-stopping"])
def test_a_message_whose_files_were_read_during_stop_is_given_back_not_sent(
    agent: Any, monkeypatch: pytest.MonkeyPatch, stopped_turn_ended: bool
) -> None:
    """Stop pressed while a message's @file is still being read (it is in no turn yet): once
    read, the message goes back to the box like a queued one, and never reaches the agent;
    whether the stopped turn has ended by then (the message's turn would start at once) or is
    still stopping (its turn would be queued behind it)."""
    import threading

    from acp_notebook.chat.widget import ChatWidget
    from acp_notebook.client import attachments
    from acp_notebook.client.serving.workspace import Workspace
    from tests.agents.script import script
    from tests.client_helpers import Watcher, tool_call

    (agent.cwd / "late.txt").write_text("a file read slowly")
    (agent.cwd / "held.txt").write_text("what the stopped turn reads after the cancel")
    # The message's file read is held until the test lets it go (after the Stop).
    reading, let_read = threading.Event(), threading.Event()
    read_regular = attachments._read_regular

    def held_read(*args: Any) -> Any:
        reading.set()
        let_read.wait(20)
        return read_regular(*args)

    monkeypatch.setattr(attachments, "_read_regular", held_read)
    # Still stopping: after the cancel the stopped turn reads a file through the client, held
    # too, so it has not ended when the message's file is read.
    agent_reads, let_agent_read = threading.Event(), threading.Event()
    workspace_read = Workspace._read

    def held_agent_read(self: Workspace, *args: Any) -> str:
        agent_reads.set()
        let_agent_read.wait(20)
        return workspace_read(self, *args)

    monkeypatch.setattr(Workspace, "_read", held_agent_read)
    reads = [{"request": "fs/read_text_file", "params": {"path": str(agent.cwd / "held.txt")}}]
    slow = script(
        {"update": tool_call("c1")},
        {"wait_cancel": True, "after_cancel": [] if stopped_turn_ended else reads},
    )

    async def main() -> tuple[ChatWidget, list[Any], bool]:
        async with agent.client(cancel_grace=30) as client:
            session = await client.new_session()
            chat = ChatWidget(session)
            to_page: list[Any] = []
            chat.input.send = to_page.append  # type: ignore[method-assign,assignment]
            watcher = Watcher(session)
            running = asyncio.create_task(chat.send(slow))
            await watcher.tool_call("c1")
            first = session.running
            assert first is not None
            late = asyncio.create_task(chat.send("and read this", files=["late.txt"]))
            assert await asyncio.to_thread(reading.wait, 20)
            chat.input.value = "a draft"
            stopping = asyncio.create_task(chat.stop())
            if stopped_turn_ended:
                await stopping
                await running  # the stopped turn's send, its `finally` run
                assert first.done and not chat.stop_button.disabled  # a message still loading
            else:  # the agent got the cancel and is still at it
                assert await asyncio.to_thread(agent_reads.wait, 20)
            still_stopping = not first.done
            let_read.set()
            assert await late is None  # not sent: given back
            if stopped_turn_ended:
                assert chat.stop_button.disabled  # nothing running, nothing loading
            assert chat.input.value == "a draft\n\nand read this"
            # Each message sent brought the page's log down to it; the one given back its file.
            assert to_page == [{"event": "follow"}] * 2 + [
                {"event": "attach", "files": ["late.txt"]}
            ]
            assert list(chat.views) == [first.id] and len(chat.log.children) == 1
            let_agent_read.set()
            await stopping
            assert (await running) is first and first.result is not None
            assert first.result.stop_reason == "cancelled"
            # Sent again, it is the session's next turn, its file attached.
            again = await chat.send(files=["late.txt"])
            assert again is not None and again.result is not None and again.result.success
            return chat, agent.sent("session/prompt"), still_stopping

    chat, prompts, still_stopping = asyncio.run(main())
    assert still_stopping is not stopped_turn_ended  # the race went the way this case needs
    assert len(prompts) == 2, prompts  # the stopped turn, then the message sent again
    assert "and read this" not in json_of(prompts[0])
    assert prompts[0]["params"]["sessionId"] == prompts[1]["params"]["sessionId"]
    again = json_of(prompts[1]["params"]["prompt"])
    assert "a draft" in again and "and read this" in again and "late.txt" in again
    assert len(chat.records) == 2 and len(chat.log.children) == 2


@pytest.mark.scripted_agent("in_process")
def test_turns_started_elsewhere_on_the_session_are_shown_and_recorded_once(agent: Any) -> None:
    """A turn prompted on the session itself (as a `%%agent -s` cell does) shows in the chat
    open on it, with the user's message, and is recorded once; a chat opened while it runs
    shows it too; the chat's own turn has one view, in both chats; Stop in a chat stops it."""
    from acp_notebook.chat.turns import past_turns
    from acp_notebook.chat.widget import ChatWidget
    from tests.agents.script import script
    from tests.client_helpers import Watcher, tool_call

    async def settled(*chats: ChatWidget) -> None:
        # The chats record a followed turn in a task of their own once it ends: wait for those.
        for chat in chats:
            await chat.kernel.settled()

    async def main() -> tuple[ChatWidget, ChatWidget, Any, Any, list[str]]:
        async with agent.client() as client:
            session = await client.new_session()
            first = ChatWidget(session)
            watcher = Watcher(session)
            slow = script({"update": tool_call("c1")}, {"wait_cancel": True})
            theirs = await session.prompt([slow, "a question from a cell"])
            await watcher.tool_call("c1")
            assert list(first.views) == [theirs.id] and len(first.log.children) == 1
            assert theirs.permission_handler is None  # its asker keeps its requests
            second = ChatWidget(session)  # opened while the turn runs
            assert list(second.views) == [theirs.id] and len(second.log.children) == 1
            await first.stop()  # the chat's Stop stops a turn it did not start
            assert theirs.result is not None and theirs.result.stop_reason == "cancelled"
            await settled(first, second)
            own = await second.send("the chat's own message")
            assert own is not None
            await settled(first, second)
            return first, second, theirs, own, [t.turn_id for t in past_turns(session)]

    first, second, theirs, own, past = asyncio.run(main())
    for chat in (first, second):
        assert list(chat.views) == [theirs.id, own.id] and len(chat.log.children) == 2
        assert len(chat.records) == 2
        theirs_shown, own_shown = (r["text/html"] for r in chat.records)
        assert "a question from a cell" in theirs_shown and "cancelled" in theirs_shown
        assert own_shown.count("the chat's own message") == 2  # said, and echoed
    assert past == [theirs.id, own.id]  # the next chat gets each turn once


def test_a_huge_folder_is_not_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`@` completion read every entry of a folder, then sorted them, to keep `limit * 4`: a
    folder of millions of files (an agent's shell makes one in seconds) held them all."""
    from acp_notebook.chat import input as chat_files

    read = 0

    class Entry:
        def __init__(self, n: int) -> None:
            self.name = f"f{n:07}.txt"
            self.path = str(tmp_path / self.name)

        def is_symlink(self) -> bool:
            return False

        def is_dir(self, follow_symlinks: bool = True) -> bool:
            return False

        def is_file(self, follow_symlinks: bool = True) -> bool:
            return True

    class Folder:
        def __enter__(self) -> Any:
            def entries() -> Any:
                nonlocal read
                for n in range(1_000_000):
                    read += 1
                    yield Entry(n)

            return entries()

        def __exit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(chat_files.os, "scandir", lambda folder: Folder())
    assert len(list_files(tmp_path, limit=10)) == 10
    assert read <= 10 * 4 + 1, f"{read:,} entries read to list 10 files"


@pytest.mark.scripted_agent("in_process")
def test_a_suggestion_clicked_in_a_turn_goes_to_the_input_if_it_is_one(agent: Any) -> None:
    from acp_notebook.chat.widget import ChatWidget
    from tests.agents.script import script

    async def main() -> ChatWidget:
        async with agent.client() as client:
            session = await client.new_session()
            chat = ChatWidget(session)
            await chat.send(script({"say": "Done."}, {"suggest": ["Run the tests", "Plot"]}))
            (view,) = chat.views.values()
            await view.turn.finished
            chat.input.value = "my draft"
            # The page names a suggestion by its text: one the view does not show is ignored.
            view._page_said({"type": "suggest", "text": "rm -rf / (not suggested)"})
            assert chat.input.value == "my draft"
            view._page_said({"type": "suggest", "text": "  Plot "})
            return chat

    chat = asyncio.run(main())
    assert chat.input.value == "Plot"


@pytest.mark.scripted_agent("in_process")
def test_suggestions_sent_after_the_turn_are_offered_above_the_box(
    agent: Any, tmp_path: Path
) -> None:
    from acp_notebook.chat.widget import ChatWidget
    from acp_notebook.protocol.mutations import PartUpdated
    from acp_notebook.protocol.suggestions import SuggestionsPart
    from tests.agents.script import script
    from tests.client_helpers import Watcher

    late = ["Plot the result", "x" * 300]
    fifo = tmp_path / "after.fifo"  # the agent sends them once the test's turn has ended
    os.mkfifo(fifo)

    async def main() -> tuple[list[str], list[str], str, int]:
        async with agent.client() as client:
            session = await client.new_session()
            chat = ChatWidget(session)
            watcher = Watcher(session)
            steps = (
                {"say": "Done."},
                {"after_turn": [{"wait_fifo": str(fifo)}, {"suggest": late}]},
            )
            turn = await chat.send(script(*steps))
            assert turn is not None
            await turn.finished
            await asyncio.to_thread(fifo.write_text, "go")
            await watcher.wait_for(
                lambda m: isinstance(m, PartUpdated) and isinstance(m.part, SuggestionsPart)
            )
            buttons = list(chat.suggestions.children)
            labels = [b.description for b in buttons]
            tips = [b.tooltip for b in buttons]
            buttons[0].click()
            await asyncio.sleep(0)  # the click is handed to the kernel's loop (widgets/loop.py)
            chosen = chat.input.value
            await chat.send("next")  # sending one answers what was predicted: the row goes
            return labels, tips, chosen, len(chat.suggestions.children)

    labels, tips, chosen, left = asyncio.run(main())
    assert labels == ["Plot the result", "x" * 79 + "…"] and tips == late
    assert chosen == "Plot the result" and left == 0
