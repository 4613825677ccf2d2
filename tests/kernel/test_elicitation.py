"""Elicitation (issue 11): the agent asks the user for input, in a form or by a link. Read and
checked (pure), answered by a handler or declined (client, scripted agent), recorded and drawn
(renderers, a headless kernel)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ada_url
import anyio
import pytest

from acp_notebook.errors import ElicitationError
from acp_notebook.protocol.elicitation import ElicitationPart, check_answer, read_request
from acp_notebook.protocol.turn import read_turn
from acp_notebook.render import render_html, render_markdown, render_text
from acp_notebook.widgets.elicit_form import PendingForms
from tests.agents.script import script
from tests.client_helpers import Agent, reports
from tests.nb_util import execute, scripted, text, transcripts
from tests.shared_kernel import SharedKernel

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 2},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "ok": {"type": "boolean", "default": True},
        "colour": {"type": "string", "enum": ["red", "green"]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}},
    },
    "required": ["name"],
}


def form(message: str = "Who are you?", schema: dict[str, Any] = SCHEMA) -> dict[str, Any]:
    return {"message": message, "mode": "form", "requestedSchema": schema}


def link(url: str = "https://login.example.com/device?code=1") -> dict[str, Any]:
    return {"message": "Sign in", "mode": "url", "url": url, "elicitationId": "el-1"}


# -- reading and checking (pure) -----------------------------------------------------------------


def test_a_form_is_read_into_typed_fields_and_an_answer_converted_to_them() -> None:
    part = read_request(form(), "e1")
    assert [(f.name, f.type, f.required) for f in part.fields] == [
        ("name", "string", True),
        ("age", "integer", False),
        ("ok", "boolean", False),
        ("colour", "string", False),
        ("tags", "array", False),
    ]
    answer = check_answer(part, {"name": "Ada", "age": "36", "ok": "false", "tags": ["a", "c"]})
    assert answer == {"name": "Ada", "age": 36, "ok": False, "tags": ["a", "c"]}


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ({}, "Your name is required"),
        ({"name": "A"}, "at least 2 characters"),
        ({"name": "Ada", "age": "old"}, "whole number"),
        ({"name": "Ada", "age": 200}, "at most 150"),
        ({"name": "Ada", "colour": "blue"}, "not one of the choices"),
        ({"name": "Ada", "tags": ["z"]}, "not one of the choices"),
        ({"name": "Ada", "nope": 1}, "no field named 'nope'"),
        ("Ada", "must be a mapping"),
    ],
)
def test_an_answer_that_does_not_fit_says_which_field_and_why(content: Any, problem: str) -> None:
    with pytest.raises(ElicitationError, match=problem):
        check_answer(read_request(form(), "e1"), content)


@pytest.mark.parametrize(
    ("content", "name"),
    [({}, "name"), ({"name": "A"}, "name"), ({"name": "Ada", "age": "old"}, "age"), ({"x": 1}, "")],
)
def test_a_wrong_answer_names_its_field_for_the_form(content: Any, name: str) -> None:
    """The live form says the mistake next to the field it is about (issue 23, item 11)."""
    with pytest.raises(ElicitationError) as caught:
        check_answer(read_request(form(), "e1"), content)
    assert caught.value.field == name


def test_a_long_free_text_field_is_multiline_and_the_rest_one_line() -> None:
    schema = {
        "type": "object",
        "properties": {
            "story": {"type": "string", "maxLength": 5000},
            "poem": {"type": "string", "default": "two\nlines"},
            "name": {"type": "string", "maxLength": 80},
            "mail": {"type": "string", "format": "email", "maxLength": 5000},
            "colour": {"type": "string", "enum": ["red"], "maxLength": 5000},
            "age": {"type": "integer", "maximum": 5000},
        },
    }
    fields = read_request(form(schema=schema), "e1").fields
    assert [f.name for f in fields if f.multiline] == ["story", "poem"]


@pytest.mark.parametrize("typed", ["1e999", "-inf", "nan", float("inf")])
def test_a_number_that_is_no_json_number_is_refused(typed: Any) -> None:
    # float() reads these; the answer carried Infinity or NaN, which no JSON reader accepts.
    schema = {"type": "object", "properties": {"size": {"type": "number"}}}
    with pytest.raises(ElicitationError, match="finite number"):
        check_answer(read_request(form(schema=schema), "e1"), {"size": typed})


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ("x", "must be an object"),
        ({"mode": "telepathy", "message": "hi"}, "unsupported elicitation mode"),
        ({"mode": "form", "message": "hi"}, "requestedSchema.properties"),
        (form(schema={"type": "object", "properties": {"x": {"type": "object"}}}), "type"),
        (link("javascript:alert(1)"), "http"),
        ({"mode": "url", "message": "m", "url": "https://x"}, "elicitationId"),
    ],
)
def test_a_request_that_cannot_be_shown_is_refused_clearly(params: Any, problem: str) -> None:
    with pytest.raises(ElicitationError, match=problem):
        read_request(params, "e1")


def test_a_part_reads_back_from_its_json_and_hostile_text_is_escaped_in_every_view() -> None:
    part = read_request(form(message="<script>alert(1)</script> **bold**"), "e1")
    part.outcome, part.content, part.decided_by = "accept", {"name": "<img src=x>"}, "user"
    again = ElicitationPart.from_json(json.loads(json.dumps(part.to_json())))
    assert again.to_json() == part.to_json()
    turn = read_turn({"turnId": "t", "parts": [part.to_json()], "success": True})
    html, md, plain = render_html(turn), render_markdown(turn), render_text(turn)
    assert "<script>" not in html and "&lt;script&gt;" in html and "<img" not in html
    assert "<script>" not in md and "answered" in md
    assert "❓ the agent asked: <script>alert(1)</script> **bold**" in plain


def test_the_record_lists_each_field_asked_with_its_answer_and_no_fields_line() -> None:
    """Issue 23, item 11: the card said "fields: ..." and then the answers, the form twice. An
    answered record is one list, each field with what was answered ("—": left empty); a question
    not answered says what it asked for; a live one's line is hidden where its form is drawn."""
    part = read_request(form(), "e1")
    live = read_turn({"turnId": "t", "parts": [part.to_json()], "live": True}, live=True)
    assert "<div class='acpnb-muted acpnb-elicit-asked'>asked for: Your name, age, ok," in (
        render_html(live)
    )
    part.outcome, part.content, part.decided_by = "accept", {"name": "Ada", "tags": ["b"]}, "user"
    turn = read_turn({"turnId": "t", "parts": [part.to_json()], "success": True})
    html, md, plain = render_html(turn), render_markdown(turn), render_text(turn)
    for view in (html, md, plain):
        assert "fields:" not in view and "asked for" not in view
    assert (
        "<ul class=acpnb-elicit-answers><li>Your name: <code>Ada</code></li>"
        "<li>age: <span class=acpnb-muted>—</span></li>"
    ) in html
    assert "answered (Your name: Ada; age: —; ok: —; colour: —; tags: b)" in plain
    assert "**answered**: Your name: Ada; age: —; ok: —; colour: —; tags: b" in md
    part.outcome, part.content, part.decided_by = "decline", None, "nobody to answer"
    plain = render_text(read_turn({"turnId": "t", "parts": [part.to_json()]}))
    assert "[asked for: Your name, age, ok, colour, tags] → declined (nobody to answer)" in plain


def test_the_record_of_a_huge_form_stays_bounded() -> None:
    """Titles and answers are the agent's and a saved file's: the lists are cut, each item too."""
    title = "T" * 500
    fields = [{"name": f"f{i}", "type": "string", "title": title} for i in range(50)]
    extra = {f"x{i}": ["v" * 300] * 1000 for i in range(5000)}
    part = {"type": "elicitation", "id": "e1", "mode": "form", "message": "m", "fields": fields}
    for outcome, content in (("decline", None), ("accept", extra)):
        turn = read_turn(
            {"turnId": "t", "parts": [{**part, "outcome": outcome, "content": content}]}
        )
        for view in (render_text(turn), render_markdown(turn), render_html(turn)):
            assert len(view) < 60_000, (outcome, len(view))


@pytest.mark.anyio
async def test_the_same_wrong_answer_twice_is_said_again_by_its_field() -> None:
    """The page waits for the kernel's word on each answer before it may send again: the same
    refusal twice must reach it twice (it once left the form's buttons disabled for good)."""
    changed = anyio.Event()
    forms = PendingForms(changed.set, lambda s: s)
    got: list[Any] = []

    async def ask() -> None:
        got.append(await forms.ask(read_request(form(), "e1")))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await changed.wait()
            seen = []
            for _ in range(2):
                forms.answered({"id": "e1", "action": "accept", "values": {"age": "3"}})
                seen.append(dict(forms.for_page()[0]))
            assert [(f["error"], f["errorField"], f["tries"]) for f in seen] == [
                ("Your name is required", "name", 1),
                ("Your name is required", "name", 2),
            ]
            forms.answered({"id": "e1", "action": "accept", "values": {"name": "Ada"}})
    assert got == [{"name": "Ada"}]


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example\\@good.example/",  # urlsplit: good.example; a browser: evil
        "https://good.example\t.evil.example/",  # a browser drops the tab
        "https://good.example\n/",
        "https://%65vil.example/",  # a browser decodes the host's escapes
        "https://g\u043e\u043egle.example/",  # Cyrillic o's, which a browser maps to xn--
        "https://good.example/a b",
    ],
)
def test_a_url_whose_host_a_browser_reads_otherwise_is_refused(url: str) -> None:
    """The host is shown before the link is followed (issue 20): it must be the host the
    browser opens (ada reads as the WHATWG standard does), or the link is refused in its card."""
    try:
        part = read_request(link(url), "e1")
    except ElicitationError:
        return  # not a web address at all: said to the agent
    if part.link.ok:
        assert part.host == str(ada_url.URL(url).host) and "good.example/" not in part.host
    else:
        assert part.host == ""
        assert "link refused" in render_text(read_turn({"turnId": "t", "parts": [part.to_json()]}))


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://user@login.example.com/x", ""),  # user info: refused, no host shown
        ("https://xn--ggle-55da.example/", "xn--ggle-55da.example"),
        ("http://[::1]:8080/cb", "[::1]:8080"),  # as `new URL(href).host` gives it
        ("http://127.0.0.1:9/cb?state=a%20b", "127.0.0.1:9"),
    ],
)
def test_a_url_read_alike_is_asked_with_its_host(url: str, host: str) -> None:
    assert read_request(link(url), "e1").host == host


def test_a_url_is_drawn_as_text_with_its_host_never_as_a_link() -> None:
    part = read_request(link(), "e1")
    assert part.host == "login.example.com"
    html = render_html(read_turn({"turnId": "t", "parts": [part.to_json()]}))
    assert "(host <code class=acpnb-host>login.example.com</code>)" in html and "<a " not in html


# -- answered by the client ----------------------------------------------------------------------


def ask(params: dict[str, Any]) -> dict[str, Any]:
    return {"request": "elicitation/create", "params": params}


@pytest.mark.anyio
@pytest.mark.scripted_agent("in_process")
async def test_a_handler_answers_and_the_agent_gets_the_converted_values(agent: Agent) -> None:
    seen: list[ElicitationPart] = []

    async def handler(part: ElicitationPart) -> Any:
        seen.append(part)
        return {"name": "Ada", "age": "36"} if part.mode == "form" else "accept"

    with anyio.fail_after(30):
        async with agent.client(elicitation_handler=handler) as client:
            assert agent_caps(agent) == {"form": {}, "url": {}}
            session = await client.new_session()
            result = await (await session.prompt(script(ask(form()), ask(link())))).finished
    answers = [r["result"] for r in reports(result.text, "RESPONSE ")]
    assert answers == [
        {"action": "accept", "content": {"name": "Ada", "age": 36}},
        {"action": "accept"},
    ]
    parts = [p for p in result.parts if isinstance(p, ElicitationPart)]
    assert [(p.mode, p.outcome, p.decided_by) for p in parts] == [
        ("form", "accept", "user"),
        ("url", "accept", "user"),
    ]
    assert [p.part_id for p in seen] == [p.part_id for p in parts]


def agent_caps(agent: Agent) -> Any:
    return agent.sent("initialize")[0]["params"]["clientCapabilities"]["elicitation"]


@pytest.mark.anyio
@pytest.mark.scripted_agent("in_process")
async def test_without_a_handler_declined_and_a_failing_handler_declines_saying_why(
    agent: Agent,
) -> None:
    async def too_slow(part: ElicitationPart) -> Any:
        raise TimeoutError("no answer within 600 s")

    async def wrong(part: ElicitationPart) -> Any:
        return {"name": "A"}  # too short: the answer is checked before it is sent

    async with agent.session(bound=30) as session:
        plain = await (await session.prompt(script(ask(form())))).finished
        session.elicitation_handler = too_slow
        slow = await (await session.prompt(script(ask(form())))).finished
        session.elicitation_handler = wrong
        bad = await (await session.prompt(script(ask(form()), ask({"mode": "x"})))).finished
    assert [r["result"] for r in reports(plain.text, "RESPONSE ")] == [{"action": "decline"}]
    assert [r["result"] for r in reports(slow.text, "RESPONSE ")] == [{"action": "decline"}]
    bad_answers = reports(bad.text, "RESPONSE ")
    assert bad_answers[0]["result"] == {"action": "cancel"}
    assert bad_answers[1]["error"]["code"] == -32602
    (p1,) = [p for p in plain.parts if isinstance(p, ElicitationPart)]
    (p2,) = [p for p in slow.parts if isinstance(p, ElicitationPart)]
    (p3,) = [p for p in bad.parts if isinstance(p, ElicitationPart)]
    assert (p1.outcome, p1.decided_by) == ("decline", "nobody to answer")
    assert (p2.outcome, p2.decided_by) == ("decline", "declined: no answer within 600 s")
    assert p3.outcome == "cancel" and "at least 2 characters" in (p3.decided_by or "")
    assert any("cannot show" in e for e in bad.errors)


@pytest.mark.anyio
@pytest.mark.scripted_agent("in_process")
async def test_stop_cancels_a_pending_elicitation(agent: Agent) -> None:
    asked = anyio.Event()

    async def never(part: ElicitationPart) -> Any:
        asked.set()
        await anyio.sleep_forever()

    async with agent.session(elicitation_handler=never, bound=30) as session:
        turn = await session.prompt(script(ask(form())))
        await asked.wait()
        await turn.cancel()
        result = await turn.finished
    (part,) = [p for p in result.parts if isinstance(p, ElicitationPart)]
    assert part.outcome == "cancel"


# -- headless, in a kernel -----------------------------------------------------------------------


def test_headless_an_elicitation_is_declined_and_the_record_says_so(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    cell = f"%%agent -a {scripted()}\n{script(ask(form(message='Which colour?')))}"
    nb = execute([cell], tmp_path, kernel=kernel)
    shown = text(nb.cells[0])
    assert "Which colour?" in shown and "declined (nobody to answer)" in shown
    (transcript,) = transcripts(nb.cells[0])
    (part,) = [p for p in transcript["parts"] if p["type"] == "elicitation"]
    assert part["outcome"] == "decline" and part["fields"][0]["name"] == "name"
