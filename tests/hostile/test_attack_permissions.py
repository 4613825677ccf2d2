"""Attacks on the permission policy that the first hostile suite missed.

A tool call's earlier kinds were read from its folded state, which keeps only the latest kind:
a request asked again as `read` (or a `tool_call_update` relabelling the call) overwrote the
`execute` it was stated as, so the next request for it shed the denied kind and was allowed.
"""

from __future__ import annotations

import pytest

from acp_notebook.client.serving.permissions import PermissionPolicy
from tests.agents.script import script
from tests.client_helpers import Agent, reports

# The agent runs in this process (no spawn per test) unless a test needs a real process.
pytestmark = [pytest.mark.anyio, pytest.mark.scripted_agent("in_process")]


@pytest.mark.parametrize(
    "policy",
    [
        PermissionPolicy(allow={"read"}, deny={"execute"}),
        PermissionPolicy(allow={"read"}, default="ask"),
    ],
)
async def test_a_tool_call_never_sheds_a_kind_it_was_stated_as(
    agent: Agent, policy: PermissionPolicy
) -> None:
    async with agent.session(permission_policy=policy) as session:
        result = await (
            await session.prompt(
                script(
                    # Asked as an execute, then as a read twice: the third was allowed.
                    {
                        "permission": {
                            "toolCallId": "c1",
                            "kind": "execute",
                            "title": "rm -rf ~",
                        }
                    },
                    {"permission": {"toolCallId": "c1", "kind": "read", "title": "look"}},
                    {"permission": {"toolCallId": "c1", "kind": "read", "title": "look"}},
                    # Shown as an execute, relabelled a read by an update, asked as a read.
                    {
                        "update": {
                            "sessionUpdate": "tool_call",
                            "toolCallId": "c2",
                            "title": "rm -rf ~",
                            "kind": "execute",
                        }
                    },
                    {
                        "update": {
                            "sessionUpdate": "tool_call_update",
                            "toolCallId": "c2",
                            "kind": "read",
                        }
                    },
                    {"permission": {"toolCallId": "c2", "kind": "read", "title": "look"}},
                    # Relabelled without a kind in the request.
                    {
                        "update": {
                            "sessionUpdate": "tool_call",
                            "toolCallId": "c3",
                            "title": "rm -rf ~",
                            "kind": "execute",
                        }
                    },
                    {
                        "update": {
                            "sessionUpdate": "tool_call_update",
                            "toolCallId": "c3",
                            "kind": "read",
                        }
                    },
                    {"permission": {"toolCallId": "c3"}},
                    # A read throughout is still allowed.
                    {
                        "update": {
                            "sessionUpdate": "tool_call",
                            "toolCallId": "c4",
                            "title": "cat x",
                            "kind": "read",
                        }
                    },
                    {"permission": {"toolCallId": "c4", "kind": "read"}},
                    {"permission": {"toolCallId": "c4", "kind": "read"}},
                )
            )
        ).finished
    answers = reports(result.text, "PERMISSION ")
    assert [a["result"]["outcome"]["optionId"] for a in answers] == [
        "reject",
        "reject",
        "reject",
        "reject",
        "reject",
        "allow",
        "allow",
    ]


async def test_a_diff_or_terminal_replaced_by_an_update_still_counts(agent: Agent) -> None:
    policy = PermissionPolicy(allow={"read"}, deny={"edit", "execute"})
    diff = {"type": "diff", "path": "/etc/passwd", "oldText": "a", "newText": "b"}
    async with agent.session(permission_policy=policy) as session:
        result = await (
            await session.prompt(
                script(
                    {
                        "update": {
                            "sessionUpdate": "tool_call",
                            "toolCallId": "d1",
                            "title": "look",
                            "kind": "read",
                            "content": [diff],
                        }
                    },
                    {
                        "update": {
                            "sessionUpdate": "tool_call_update",
                            "toolCallId": "d1",
                            "content": [],
                        }
                    },
                    {"permission": {"toolCallId": "d1", "kind": "read"}},
                    {
                        "update": {
                            "sessionUpdate": "tool_call",
                            "toolCallId": "t1",
                            "title": "look",
                            "kind": "read",
                            "content": [{"type": "terminal", "terminalId": "x"}],
                        }
                    },
                    {
                        "update": {
                            "sessionUpdate": "tool_call_update",
                            "toolCallId": "t1",
                            "content": [],
                        }
                    },
                    {"permission": {"toolCallId": "t1", "kind": "read"}},
                    {"permission": {"toolCallId": "r1", "kind": "read"}},
                )
            )
        ).finished
    answers = reports(result.text, "PERMISSION ")
    assert [a["result"]["outcome"]["optionId"] for a in answers] == ["reject", "reject", "allow"]
