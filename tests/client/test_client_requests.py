"""Requests from the agent: permissions (policy and handler), fs confinement, terminals,
$/cancel_request in both directions, -32601 for unknown methods, unknown notifications."""

from __future__ import annotations

import itertools
import json
import sys

import anyio
import pytest

from acp_notebook.client.serving.permissions import PermissionPolicy
from acp_notebook.client.serving.terminal import Terminals
from acp_notebook.protocol.mutations import Delta
from tests.agents.script import script
from tests.client_helpers import Agent, Watcher, alive, gone, reports

# The agent runs in this process (no spawn per test) unless a test needs a real process.
pytestmark = [pytest.mark.anyio, pytest.mark.scripted_agent("in_process")]

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
NOT_FOUND = -32002
CANCELLED = -32800


@pytest.fixture
def term_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Terminal ids from term-1 in every test, so a static script can name them."""
    monkeypatch.setattr(Terminals, "_ids", itertools.count(1))


def req(method: str, **params) -> dict:
    return {"request": method, "params": params}


def error_code(response: dict) -> int | None:
    return response["error"]["code"] if "error" in response else None


# -- unknown methods and notifications -----------------------------------------------------------


async def test_unknown_methods_get_method_not_found(agent: Agent) -> None:
    async with agent.session() as session:
        result = await (
            await session.prompt(
                script(
                    req("_x/y", anything=1),
                    req("terminal/create", command="true"),  # terminal=False: not offered
                    {"request": "_x/no_session", "params": {"sessionId": "sess_unknown"}},
                )
            )
        ).finished
    assert result.success, result
    codes = [error_code(r) for r in reports(result.text, "RESPONSE ")]
    assert codes == [METHOD_NOT_FOUND] * 3  # elicitation/create is served: test_elicitation


async def test_unknown_notifications_are_ignored(agent: Agent) -> None:
    lines = [
        {"jsonrpc": "2.0", "method": "_vendor/notice", "params": {"x": 1}},
        {"jsonrpc": "2.0", "method": "elicitation/complete", "params": {"elicitationId": "e"}},
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 12345}},
        {"jsonrpc": "2.0", "method": "$/progress", "params": None},
    ]
    with anyio.fail_after(20):
        async with agent.client() as client:
            session = await client.new_session()
            result = await (
                await session.prompt(
                    script(*({"raw": json.dumps(line)} for line in lines), {"say": "fine"})
                )
            ).finished
            assert list(client.protocol_errors) == []
    assert result.success and result.text == "fine"
    assert result.errors == () and result.unknown_updates == ()
    assert agent.responses() == []  # notifications never get an answer


# -- permissions ---------------------------------------------------------------------------------


async def test_permission_policy_decides_by_tool_kind(agent: Agent) -> None:
    def ask(kind: str, call_id: str) -> dict:
        return {"permission": {"toolCallId": call_id, "title": f"a {kind}", "kind": kind}}

    with anyio.fail_after(20):
        policy = PermissionPolicy(allow={"read"}, deny={"execute"}, default="ask")
        async with agent.client(permission_policy=policy) as client:
            session = await client.new_session()
            result = await (
                await session.prompt(
                    script(ask("read", "c1"), ask("execute", "c2"), ask("edit", "c3"))
                )
            ).finished
    answers = reports(result.text, "PERMISSION ")
    assert [a["result"]["outcome"] for a in answers] == [
        {"outcome": "selected", "optionId": "allow"},
        {"outcome": "selected", "optionId": "reject"},
        {"outcome": "selected", "optionId": "reject"},  # "ask" with nobody to ask: fail closed
    ]
    by = [(p.tool_call_id, p.option_id, p.decided_by) for p in result.permissions]
    assert by == [
        ("c1", "allow", "policy"),
        ("c2", "reject", "policy"),
        ("c3", "reject", "policy (nobody to ask)"),
    ]


async def test_a_turns_own_policy_and_handler_apply_to_that_turn_only(agent: Agent) -> None:
    asked = []

    async def handler(request):
        asked.append(request.tool_call["toolCallId"])
        return "allow"

    step = {"permission": {"toolCallId": "c1", "title": "an edit", "kind": "edit"}}
    async with agent.session() as session:
        allowed = await (
            await session.prompt(script(step), permission_policy=PermissionPolicy(allow={"edit"}))
        ).finished
        handled = await (await session.prompt(script(step), permission_handler=handler)).finished
        plain = await (await session.prompt(script(step))).finished
    decided = [
        (r.permissions[0].option_id, r.permissions[0].decided_by) for r in (allowed, handled, plain)
    ]
    assert decided == [
        ("allow", "policy"),
        ("allow", "user"),
        ("reject", "policy (nobody to ask)"),
    ]  # the session's own, untouched
    assert asked == ["c1"]


async def test_permission_handler_is_asked_and_its_answer_sent(agent: Agent) -> None:
    seen = []

    async def handler(request):
        seen.append(
            (
                request.tool_kind,
                request.tool_call["toolCallId"],
                request.session_id,
                [o["optionId"] for o in request.options],
            )
        )
        return "allow-always"

    async with agent.session(permission_handler=handler) as session:
        result = await (
            await session.prompt(
                script(
                    {"permission": {"toolCallId": "c1", "title": "Edit x", "kind": "edit"}},
                    {
                        "permission": {"toolCallId": "c2", "title": "Edit y", "kind": "edit"},
                        "options": [{"optionId": "only-no", "name": "No", "kind": "reject_once"}],
                    },
                )
            )
        ).finished
    assert seen[0] == (
        "edit",
        "c1",
        session.id,
        ["allow", "allow-always", "reject", "reject-always"],
    )
    answers = reports(result.text, "PERMISSION ")
    assert answers[0] == {
        "result": {"outcome": {"outcome": "selected", "optionId": "allow-always"}}
    }
    # The handler chose an option the agent did not offer: an error, not a made-up answer.
    assert error_code(answers[1]) == INVALID_PARAMS
    assert result.permissions[0].decided_by == "user"
    assert [c.title for c in result.tool_calls] == ["Edit x", "Edit y"]


async def test_a_failing_handler_rejects_and_the_record_says_why(agent: Agent) -> None:
    # An exception object is always true: `exc or type(exc).__name__` recorded a bare
    # TimeoutError() as "rejected: ", with no reason.
    failures = iter([TimeoutError(), ValueError("the widget is gone")])

    async def handler(request):
        raise next(failures)

    async with agent.session(permission_handler=handler) as session:
        result = await (
            await session.prompt(
                script(
                    {"permission": {"toolCallId": "c1", "title": "Edit x", "kind": "edit"}},
                    {"permission": {"toolCallId": "c2", "title": "Edit y", "kind": "edit"}},
                )
            )
        ).finished
    assert [(p.option_id, p.decided_by) for p in result.permissions] == [
        ("reject", "rejected: TimeoutError"),
        ("reject", "rejected: the widget is gone"),
    ]
    answers = reports(result.text, "PERMISSION ")
    assert [a["result"]["outcome"] for a in answers] == [
        {"outcome": "selected", "optionId": "reject"}
    ] * 2


async def test_agent_cancel_request_cancels_a_pending_permission(agent: Agent) -> None:
    asked = anyio.Event()

    async def never(request):
        asked.set()
        await anyio.Event().wait()

    async with agent.session(permission_handler=never) as session:
        result = await (
            await session.prompt(
                script(
                    {
                        "permission": {"toolCallId": "c1", "title": "t", "kind": "edit"},
                        "cancel_after": 0.2,
                        "id": "perm-1",
                    },
                    {"say": " and on"},
                )
            )
        ).finished
    assert asked.is_set()
    assert result.success, result  # only the request was cancelled, not the turn
    assert reports(result.text, "PERMISSION ") == [
        {"result": {"outcome": {"outcome": "cancelled"}}}
    ]
    assert [p.outcome for p in result.permissions] == ["cancelled"]
    cancel_index = next(i for i, m in enumerate(agent.messages()) if m.get("id") == "perm-1")
    assert agent.messages()[cancel_index]["result"] == {"outcome": {"outcome": "cancelled"}}


# Hostile or sloppy permission requests under a policy that allows everything by default: none
# may be allowed by the policy. Each case: (name, params of session/request_permission, whether
# a handler can be asked: only if a well-formed option is left to choose from).
OPTS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]
DIFF = {"type": "diff", "path": "/etc/passwd", "oldText": "a", "newText": "b"}
IRREGULAR: list[tuple[str, dict, bool]] = [
    ("no toolCallId", {"toolCall": {"title": "run", "kind": "execute"}}, True),
    ("empty toolCallId", {"toolCall": {"toolCallId": "", "kind": "execute"}}, True),
    ("kind Execute", {"toolCall": {"toolCallId": "k1", "kind": "Execute"}}, True),
    ("kind EXECUTE", {"toolCall": {"toolCallId": "k2", "kind": "EXECUTE"}}, True),
    ("kind ' execute'", {"toolCall": {"toolCallId": "k3", "kind": " execute"}}, True),
    ("kind not a string", {"toolCall": {"toolCallId": "k4", "kind": ["execute"]}}, True),
    ("kind never stated", {"toolCall": {"toolCallId": "k5", "title": "ls"}}, True),
    ("malformed field", {"toolCall": {"toolCallId": "k6", "kind": "read", "title": 5}}, True),
    (
        "content not a list",
        {"toolCall": {"toolCallId": "k7", "kind": "read", "content": "x"}},
        True,
    ),
    ("toolCall a string", {"toolCall": "execute"}, True),
    ("toolCall a list", {"toolCall": [{"toolCallId": "k8", "kind": "read"}]}, True),
    ("no options", {"toolCall": {"toolCallId": "o1", "kind": "read"}, "options": None}, False),
    (
        "options an object",
        {
            "toolCall": {"toolCallId": "o2", "kind": "read"},
            "options": {"optionId": "allow", "kind": "allow_once"},
        },
        False,
    ),
    (
        "unknown option kind",
        {
            "toolCall": {"toolCallId": "o3", "kind": "read"},
            "options": [{"optionId": "yes", "name": "Yes", "kind": "allow"}, *OPTS],
        },
        True,
    ),
    (
        "option id not a string",
        {
            "toolCall": {"toolCallId": "o4", "kind": "read"},
            "options": [{"optionId": 1, "name": "Allow", "kind": "allow_once"}, *OPTS],
        },
        True,
    ),
    (
        "option id twice",
        {
            "toolCall": {"toolCallId": "o5", "kind": "read"},
            "options": [
                {"optionId": "x", "name": "Allow", "kind": "allow_once"},
                {"optionId": "x", "name": "Reject", "kind": "reject_once"},
                *OPTS,
            ],
        },
        True,
    ),
    (
        "a thousand options",
        {
            "toolCall": {"toolCallId": "o6", "kind": "read"},
            "options": [
                *OPTS,
                *({"optionId": f"r{i}", "name": "No", "kind": "reject_once"} for i in range(998)),
            ],
        },
        True,
    ),
    (
        "read showing a diff",
        {"toolCall": {"toolCallId": "d1", "kind": "read", "content": [DIFF]}},
        True,
    ),
    (
        "read showing a terminal",
        {
            "toolCall": {
                "toolCallId": "d2",
                "kind": "read",
                "content": [{"type": "terminal", "terminalId": "t"}],
            }
        },
        True,
    ),
]
DEFAULT_ALLOW = PermissionPolicy(default="allow")


def irregular_steps() -> list[dict]:
    # A regular request first: the policy does allow that.
    first = req(
        "session/request_permission", toolCall={"toolCallId": "fine", "kind": "read"}, options=OPTS
    )
    return [
        first,
        *(
            req("session/request_permission", **{"options": OPTS, **params})
            for _, params, _ in IRREGULAR
        ),
    ]


def not_allowed(answer: dict) -> bool:
    outcome = answer.get("result", {}).get("outcome", {})
    return outcome == {"outcome": "cancelled"} or outcome.get("optionId") == "reject"


async def test_irregular_permission_requests_are_not_allowed_by_policy_headless(
    agent: Agent,
) -> None:
    async with agent.session(permission_policy=DEFAULT_ALLOW, bound=30) as session:
        result = await (await session.prompt(script(*irregular_steps()))).finished
    first, *answers = reports(result.text, "RESPONSE ")
    assert first == {"result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}
    verdicts = {name: not_allowed(a) for (name, _, _), a in zip(IRREGULAR, answers, strict=True)}
    assert verdicts == {name: True for name, _, _ in IRREGULAR}
    decided = [p.decided_by for p in result.permissions[1:]]
    assert decided == ["policy (nobody to ask)"] * len(IRREGULAR)
    # The record says why the policy did not decide.
    warnings = [e for e in result.errors if "cannot decide" in e]
    assert len(warnings) == len(IRREGULAR)


async def test_irregular_permission_requests_go_to_the_handler(agent: Agent) -> None:
    asked: list[tuple[str, tuple[str, ...], list[str]]] = []

    async def handler(request):
        asked.append(
            (request.tool_kind, request.problems, [o["optionId"] for o in request.options])
        )
        return None  # the user rejects

    async with agent.session(
        permission_policy=DEFAULT_ALLOW, permission_handler=handler, bound=30
    ) as session:
        result = await (await session.prompt(script(*irregular_steps()))).finished
    _, *answers = reports(result.text, "RESPONSE ")
    assert all(not_allowed(a) for a in answers)
    askable = [name for name, _, can_ask in IRREGULAR if can_ask]
    assert len(asked) == len(askable)
    by_name = dict(zip(askable, asked, strict=True))
    assert all(problems for _, problems, _ in asked)
    # Only well-formed options are offered: never the bad or the shared ids.
    assert by_name["option id twice"][2] == ["allow", "reject"]
    assert by_name["unknown option kind"][2] == ["allow", "reject"]
    assert len(by_name["a thousand options"][2]) == 16
    assert by_name["read showing a diff"][0] == "edit+read"
    assert by_name["malformed field"][1] == ("toolCall field 'title' is malformed",)
    assert by_name["read showing a terminal"][0] == "execute+read"
    assert by_name["kind EXECUTE"][0] == "execute"


async def test_a_miscased_denied_kind_is_rejected_without_asking(agent: Agent) -> None:
    asked = []

    async def handler(request):
        asked.append(request)
        return "allow"

    policy = PermissionPolicy(allow={"*"}, deny={"execute"}, default="allow")
    async with agent.session(permission_policy=policy, permission_handler=handler) as session:
        result = await (
            await session.prompt(
                script(
                    {"permission": {"toolCallId": "c1", "kind": "EXECUTE", "title": "ls"}},
                    {
                        "permission": {
                            "toolCallId": "c2",
                            "kind": "read",
                            "title": "ls",
                            "content": [{"type": "terminal", "terminalId": "t"}],
                        }
                    },
                )
            )
        ).finished
    answers = reports(result.text, "PERMISSION ")
    assert [a["result"]["outcome"] for a in answers] == [
        {"outcome": "selected", "optionId": "reject"}
    ] * 2
    assert asked == [] and [p.decided_by for p in result.permissions] == ["policy"] * 2


async def test_a_kind_changed_since_the_tool_call_counts_as_both(agent: Agent) -> None:
    policy = PermissionPolicy(allow={"read"}, default="ask")
    async with agent.session(permission_policy=policy) as session:
        result = await (
            await session.prompt(
                script(
                    {
                        "update": {
                            "sessionUpdate": "tool_call",
                            "toolCallId": "c1",
                            "title": "rm -rf build",
                            "kind": "execute",
                        }
                    },
                    {"permission": {"toolCallId": "c1", "kind": "read", "title": "look"}},
                    # Stated only by the earlier update: that kind is the request's kind.
                    {
                        "update": {
                            "sessionUpdate": "tool_call",
                            "toolCallId": "c2",
                            "title": "cat x",
                            "kind": "read",
                        }
                    },
                    {"permission": {"toolCallId": "c2"}},
                    # Asked again as a read after it was an execute: still an execute.
                    {
                        "permission": {
                            "toolCallId": "c3",
                            "kind": "execute",
                            "title": "rm -rf ~",
                        }
                    },
                    {"permission": {"toolCallId": "c3", "kind": "read", "title": "look"}},
                )
            )
        ).finished
    answers = reports(result.text, "PERMISSION ")
    assert [a["result"]["outcome"]["optionId"] for a in answers] == [
        "reject",
        "allow",
        "reject",
        "reject",
    ]


async def test_policy_never_answers_with_an_option_of_the_other_kind(agent: Agent) -> None:
    only_reject = [{"optionId": "no", "name": "No", "kind": "reject_once"}]
    only_allow = [{"optionId": "yes", "name": "Yes", "kind": "allow_always"}]
    with anyio.fail_after(20):
        async with agent.client(
            permission_policy=PermissionPolicy(allow={"read"}, deny={"execute"})
        ) as client:
            session = await client.new_session()
            result = await (
                await session.prompt(
                    script(
                        {
                            "permission": {"toolCallId": "c1", "kind": "read"},
                            "options": only_reject,
                        },
                        {
                            "permission": {"toolCallId": "c2", "kind": "execute"},
                            "options": only_allow,
                        },
                    )
                )
            ).finished
    answers = [a["result"]["outcome"] for a in reports(result.text, "PERMISSION ")]
    # Allowed, but only "No" offered: not answered "No" as if it were a yes; rejected by the
    # fail-closed path (which may pick "No", the reject it is). Denied with only "Yes": cancelled.
    assert answers == [{"outcome": "selected", "optionId": "no"}, {"outcome": "cancelled"}]
    assert [p.decided_by for p in result.permissions] == ["policy (nobody to ask)", "policy"]


# -- fs ------------------------------------------------------------------------------------------


async def test_fs_is_confined_to_the_workspace(agent: Agent) -> None:
    cwd, tmp = agent.cwd, agent.tmp
    (cwd / "inside.txt").write_text("a\nb\nc\nd\n")
    (tmp / "outside.txt").write_text("secret")
    (cwd / "link.txt").symlink_to(tmp / "outside.txt")
    (cwd / "linkdir").symlink_to(tmp)
    (cwd / "notebook.ipynb").write_text("{}")
    steps = [
        req("fs/read_text_file", path=str(cwd / "inside.txt")),
        req("fs/read_text_file", path=str(cwd / "inside.txt"), line=2, limit=2),
        req("fs/read_text_file", path=str(cwd / "inside.txt"), line=4),
        req("fs/read_text_file", path=str(cwd / ".." / "outside.txt")),
        req("fs/read_text_file", path=str(tmp / "outside.txt")),
        req("fs/read_text_file", path="/etc/passwd"),
        req("fs/read_text_file", path=str(cwd / "link.txt")),
        req("fs/read_text_file", path=str(cwd / "linkdir" / "outside.txt")),
        req("fs/read_text_file", path=str(cwd / "notebook.ipynb")),
        req("fs/read_text_file", path="inside.txt"),  # relative
        req("fs/read_text_file", path=str(cwd / "missing.txt")),
        req("fs/write_text_file", path=str(cwd / "notebook.ipynb"), content="pwned"),
        req("fs/write_text_file", path=str(cwd / "link.txt"), content="pwned"),
        req("fs/write_text_file", path=str(cwd / ".." / "escape.txt"), content="pwned"),
        req("fs/write_text_file", path=str(cwd / "sub" / "new.txt"), content="héllo\n"),
    ]
    async with agent.session(protected_paths=[cwd / "notebook.ipynb"]) as session:
        result = await (await session.prompt(script(*steps))).finished
    answers = reports(result.text, "RESPONSE ")
    assert len(answers) == len(steps)
    assert answers[0] == {"result": {"content": "a\nb\nc\nd\n"}}
    assert answers[1] == {"result": {"content": "b\nc\n"}}
    assert answers[2] == {"result": {"content": "d\n"}}
    assert [error_code(a) for a in answers[3:10]] == [INVALID_PARAMS] * 7
    assert error_code(answers[10]) == NOT_FOUND
    assert [error_code(a) for a in answers[11:14]] == [INVALID_PARAMS] * 3
    assert answers[14] == {"result": {}}
    assert "secret" not in result.text
    assert (tmp / "outside.txt").read_text() == "secret"
    assert (cwd / "notebook.ipynb").read_text() == "{}"
    assert not (tmp / "escape.txt").exists()
    assert (cwd / "sub" / "new.txt").read_text(encoding="utf-8") == "héllo\n"


async def test_additional_directories_are_part_of_the_workspace(agent: Agent) -> None:
    extra = agent.tmp / "extra"
    extra.mkdir()
    (extra / "f.txt").write_text("extra file")
    with anyio.fail_after(20):
        async with agent.client("--additional-directories") as client:
            session = await client.new_session(additional_directories=[extra])
            result = await (
                await session.prompt(script(req("fs/read_text_file", path=str(extra / "f.txt"))))
            ).finished
    assert reports(result.text, "RESPONSE ") == [{"result": {"content": "extra file"}}]


async def test_fs_off_means_method_not_found(agent: Agent) -> None:
    (agent.cwd / "f.txt").write_text("x")
    async with agent.session(fs=False) as session:
        result = await (
            await session.prompt(
                script(
                    req("fs/read_text_file", path=str(agent.cwd / "f.txt")),
                    req("fs/write_text_file", path=str(agent.cwd / "f.txt"), content="y"),
                )
            )
        ).finished
    assert [error_code(a) for a in reports(result.text, "RESPONSE ")] == [METHOD_NOT_FOUND] * 2
    assert (agent.cwd / "f.txt").read_text() == "x"


# -- terminals -----------------------------------------------------------------------------------


async def test_terminal_lifecycle_truncation_and_record_after_release(
    agent: Agent, term_ids: None
) -> None:
    # "abcé日": 8 bytes. A 4-byte limit drops from the start, then skips the continuation
    # byte of "é", so exactly "日" is left.
    code = "import sys; sys.stdout.buffer.write('abcé日'.encode()); sys.stdout.flush(); sys.exit(3)"
    async with agent.session(terminal=True) as session:
        watcher = Watcher(session)
        result = await (
            await session.prompt(
                script(
                    req(
                        "terminal/create",
                        command=sys.executable,
                        args=["-c", code],
                        outputByteLimit=4,
                    ),
                    req("terminal/wait_for_exit", terminalId="term-1"),
                    req("terminal/output", terminalId="term-1"),
                    req("terminal/release", terminalId="term-1"),
                    req("terminal/output", terminalId="term-1"),
                    req(
                        "terminal/create",
                        command="echo $GREETING | tr a-z A-Z",
                        env=[{"name": "GREETING", "value": "hi there"}],
                    ),
                    req("terminal/wait_for_exit", terminalId="term-2"),
                    req("terminal/output", terminalId="term-2"),
                    req("terminal/create", command="pwd"),
                    req("terminal/wait_for_exit", terminalId="term-3"),
                    req("terminal/output", terminalId="term-3"),
                    req("terminal/release", terminalId="term-3"),
                    req("terminal/create", command="pwd", cwd="/"),  # outside the workspace
                )
            )
        ).finished
    answers = reports(result.text, "RESPONSE ")
    assert answers[0] == {"result": {"terminalId": "term-1"}}
    assert answers[1] == {"result": {"exitCode": 3, "signal": None}}
    assert answers[2] == {
        "result": {"output": "日", "truncated": True, "exitStatus": {"exitCode": 3, "signal": None}}
    }
    assert answers[3] == {"result": {}}
    assert error_code(answers[4]) == INVALID_PARAMS  # released: the id is gone
    assert answers[7]["result"]["output"] == "HI THERE\n"
    assert answers[7]["result"]["truncated"] is False
    assert answers[10]["result"]["output"] == f"{agent.cwd}\n"  # the session cwd by default
    assert error_code(answers[12]) is not None
    # What the terminals printed stays in the turn's record, released or not.
    terminals = {t["terminalId"]: t for t in result.terminals}
    assert terminals["term-1"]["output"] == "日" and terminals["term-1"]["truncated"] is True
    assert terminals["term-1"]["exitStatus"] == {"exitCode": 3, "signal": None}
    assert terminals["term-3"]["output"] == f"{agent.cwd}\n"
    assert "term-2" in terminals
    # Output was published live too.
    live = "".join(
        m.text for m in watcher.items if isinstance(m, Delta) and m.channel == "terminal"
    )
    assert "HI THERE" in live


async def test_terminal_kill_and_agent_cancel_request_on_wait_for_exit(
    agent: Agent, term_ids: None
) -> None:
    async with agent.session(terminal=True) as session:
        result = await (
            await session.prompt(
                script(
                    req("terminal/create", command="sleep", args=["30"]),
                    req("terminal/kill", terminalId="term-1"),
                    req("terminal/wait_for_exit", terminalId="term-1"),
                    req("terminal/output", terminalId="term-1"),  # still valid after kill
                    req("terminal/release", terminalId="term-1"),
                    req("terminal/create", command="sleep", args=["30"]),
                    {**req("terminal/wait_for_exit", terminalId="term-2"), "cancel_after": 0.2},
                    req("terminal/output", terminalId="term-2"),  # still running
                    req("terminal/release", terminalId="term-2"),
                )
            )
        ).finished
    answers = reports(result.text, "RESPONSE ")
    assert answers[1] == {"result": {}}
    assert answers[2] == {"result": {"exitCode": None, "signal": "SIGKILL"}}
    assert answers[3]["result"]["exitStatus"] == {"exitCode": None, "signal": "SIGKILL"}
    assert answers[4] == {"result": {}}
    assert error_code(answers[6]) == CANCELLED
    assert "exitStatus" not in answers[7]["result"]
    assert answers[8] == {"result": {}}
    assert result.success, result


async def test_terminals_are_killed_when_the_client_closes(agent: Agent, term_ids: None) -> None:
    async with agent.session(terminal=True) as session:
        watcher = Watcher(session)
        result = await (
            await session.prompt(script(req("terminal/create", command="echo $$; exec sleep 30")))
        ).finished
        printed = await watcher.wait_for(
            lambda m: isinstance(m, Delta) and m.channel == "terminal" and m.text.strip()
        )
        assert isinstance(printed, Delta)
        pid = int(printed.text.strip())
        assert alive(pid)
    assert result.success
    assert await gone(pid)


async def test_client_cancel_request_for_an_abandoned_request(agent: Agent) -> None:
    # When the client stops waiting for an answer it tells the agent with $/cancel_request.
    # The agent must still answer; that late answer is expected, not a protocol error.
    with anyio.fail_after(20):
        async with agent.client() as client:
            session = await client.new_session()
            conn = client._connection
            assert conn is not None
            late = anyio.Event()
            resolve = conn._resolve

            def spy(frame):  # only to know when the late answer has been handled
                resolve(frame)
                late.set()

            conn._resolve = spy
            with anyio.move_on_after(0.3) as scope:
                await conn.request(
                    "session/prompt",
                    {
                        "sessionId": session.id,
                        "prompt": [{"type": "text", "text": script({"wait_cancel": True})}],
                    },
                )
            assert scope.cancelled_caught
            await late.wait()
            assert list(client.protocol_errors) == []
            result = await (await session.prompt("next")).finished
    prompt_id = agent.sent("session/prompt")[0]["id"]
    cancels = agent.sent("$/cancel_request")
    assert [c["params"] for c in cancels] == [{"requestId": prompt_id}]
    assert result.success and result.text == "echo: next"
    assert result.errors == ()


async def test_protocol_errors_are_shown_in_the_turn_and_do_not_end_it(agent: Agent) -> None:
    with anyio.fail_after(20):
        async with agent.client() as client:
            session = await client.new_session()
            result = await (
                await session.prompt(
                    script(
                        {"say": "before"},
                        {"raw": "this is not json"},
                        {"raw_hex": "ff fe 7b 7d"},
                        {"respond_id": 99999},
                        {"raw": "[1, 2]"},
                        {"say": " after"},
                    )
                )
            ).finished
            assert len(client.protocol_errors) == 4
    assert result.success and result.text == "before\n\n after"  # the errors sit in between
    assert len(result.errors) == 4
    assert "invalid JSON" in result.errors[0] and "this is not json" in result.errors[0]
    assert "99999" in result.errors[2]
