"""Prompt input parts: text, context, files (by prompt capability), data URLs, passthrough
blocks, empty and bad input. What the agent received is read from the --record file."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from acp_notebook import PromptError
from tests.client_helpers import Agent

# The agent runs in this process (no spawn per test) unless a test needs a real process.
pytestmark = [pytest.mark.anyio, pytest.mark.scripted_agent("in_process")]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


async def sent_blocks(agent: Agent, query, *flags: str, **options) -> list[dict]:
    """Prompt once; return the blocks of the session/prompt the agent received."""
    async with agent.session(*flags, **options) as session:
        result = await (await session.prompt(query)).finished
        assert result.success, result
        agent.session_id = session.id  # type: ignore[attr-defined]
    (prompt,) = agent.sent("session/prompt")
    return prompt["params"]["prompt"]


async def test_text_and_context_parts(agent: Agent) -> None:
    blocks = await sent_blocks(
        agent,
        [
            {"type": "context", "tag": "reference", "context": 'a <b> & "c" </reference>'},
            {"type": "text", "text": "Explain"},
            "plain string part",
            {"type": "context", "tag": "cell_output-2", "context": ""},
        ],
    )
    # Sent as tagged text; the tag rides in `_meta` (agents ignore it) for the transcript.
    assert blocks == [
        {
            "type": "text",
            "text": '<reference>a &lt;b&gt; &amp; "c" &lt;/reference&gt;</reference>',
            "_meta": {"acp_notebook/context": "reference"},
        },
        {"type": "text", "text": "Explain"},
        {"type": "text", "text": "plain string part"},
        {
            "type": "text",
            "text": "<cell_output-2></cell_output-2>",
            "_meta": {"acp_notebook/context": "cell_output-2"},
        },
    ]


@pytest.mark.parametrize("tag", ["Reference", "1st", "", "a b", "a>b", "ref/x", None, "é"])
async def test_bad_context_tags_are_rejected(agent: Agent, tag) -> None:
    async with agent.session() as session:
        with pytest.raises(PromptError, match="tag"):
            await session.prompt(
                [
                    {"type": "context", "tag": tag, "context": "x"},
                    {"type": "text", "text": "hi"},
                ]
            )
    assert agent.sent("session/prompt") == []


@pytest.mark.parametrize(
    "query",
    [
        [{"type": "context", "tag": "ok", "context": 3}],
        [{"type": "file"}],
        [{"type": "video", "url": "x"}],
        [42],
        {"type": "text", "text": "a dict, not a list"},
        [{"type": "text", "text": None}],
    ],
)
async def test_malformed_parts_are_prompt_errors(agent: Agent, query) -> None:
    async with agent.session() as session:
        with pytest.raises(PromptError):
            await session.prompt(query)
    assert agent.sent("session/prompt") == []


async def test_a_text_file_without_capabilities_is_a_resource_link(agent: Agent) -> None:
    path = agent.cwd / "notes.md"
    path.write_text("# Notes\n")
    blocks = await sent_blocks(
        agent, [{"type": "text", "text": "read this"}, {"type": "file", "url": str(path)}]
    )
    assert blocks[1] == {
        "type": "resource_link",
        "uri": path.as_uri(),
        "name": "notes.md",
        "mimeType": "text/markdown",
        "size": 8,
    }


async def test_a_text_file_with_embedded_context_is_a_resource(agent: Agent) -> None:
    path = agent.cwd / "data.json"
    path.write_text('{"a": 1}')
    blocks = await sent_blocks(
        agent,
        [{"type": "text", "text": "read"}, {"type": "file", "url": "data.json"}],  # relative to cwd
        "--prompt-capabilities",
        "embedded",
    )
    assert blocks[1] == {
        "type": "resource",
        "resource": {"uri": path.as_uri(), "mimeType": "application/json", "text": '{"a": 1}'},
    }


async def test_an_image_file_follows_the_image_capability(agent: Agent, tmp_path: Path) -> None:
    path = agent.cwd / "pic.png"
    path.write_bytes(PNG)
    query = [
        {"type": "text", "text": "look"},
        {"type": "file", "url": str(path), "media_type": "image/png"},
    ]
    image = await sent_blocks(agent, query, "--prompt-capabilities", "image")
    assert image[1] == {
        "type": "image",
        "data": base64.b64encode(PNG).decode(),
        "mimeType": "image/png",
        "uri": path.as_uri(),
    }

    agent.record.unlink()
    embedded = await sent_blocks(agent, query, "--prompt-capabilities", "embedded")
    assert embedded[1] == {
        "type": "resource",
        "resource": {
            "uri": path.as_uri(),
            "mimeType": "image/png",
            "blob": base64.b64encode(PNG).decode(),
        },
    }

    agent.record.unlink()
    link = await sent_blocks(agent, query)
    assert link[1]["type"] == "resource_link" and link[1]["uri"] == path.as_uri()
    assert link[1]["size"] == len(PNG)


async def test_a_data_url_is_stored_in_the_workspace_and_referenced(agent: Agent) -> None:
    payload = "hello from a data URL\n"
    url = "data:text/plain;base64," + base64.b64encode(payload.encode()).decode()
    blocks = await sent_blocks(
        agent,
        [
            {"type": "text", "text": "see attachment"},
            {"type": "file", "url": url, "filename": "greeting.txt"},
        ],
    )
    session_id = agent.session_id  # type: ignore[attr-defined]
    folder = agent.cwd / ".acp_notebook" / session_id / "attachments"
    stored = list(folder.iterdir())
    assert len(stored) == 1
    assert stored[0].read_text() == payload
    assert stored[0].suffix == ".txt" and stored[0].name.startswith("greeting")
    link = blocks[1]
    assert link["type"] == "resource_link"
    assert link["uri"] == stored[0].resolve().as_uri()
    assert link["mimeType"] == "text/plain" and link["size"] == len(payload)
    assert "base64" not in str(blocks)  # the data itself is not inlined


async def test_a_data_url_image_with_the_image_capability(agent: Agent) -> None:
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    blocks = await sent_blocks(
        agent,
        [{"type": "text", "text": "x"}, {"type": "file", "url": url}],
        "--prompt-capabilities",
        "image",
    )
    session_id = agent.session_id  # type: ignore[attr-defined]
    (stored,) = (agent.cwd / ".acp_notebook" / session_id / "attachments").iterdir()
    assert stored.read_bytes() == PNG and stored.suffix == ".png"
    assert blocks[1] == {
        "type": "image",
        "data": base64.b64encode(PNG).decode(),
        "mimeType": "image/png",
        "uri": stored.resolve().as_uri(),
    }


async def test_bad_files_are_prompt_errors(agent: Agent) -> None:
    async with agent.session() as session:
        for part in [
            {"type": "file", "url": str(agent.cwd / "missing.txt")},
            {"type": "file", "url": str(agent.cwd)},
            {"type": "file", "url": "data:text/plain;base64,@@@"},
            {"type": "file", "url": "data:no-comma"},
        ]:
            with pytest.raises(PromptError):
                await session.prompt([{"type": "text", "text": "x"}, part])
    assert agent.sent("session/prompt") == []


async def test_a_fifo_a_device_or_a_huge_file_is_refused_before_it_is_read(agent: Agent) -> None:
    """A FIFO blocked the read for good (the cell never ended; no writer ever comes), a device
    such as /dev/zero or a file of gigabytes filled the kernel's memory: each is a clear error,
    at once, and nothing is sent."""
    import os

    from acp_notebook.client import attachments

    fifo = agent.cwd / "pipe"
    os.mkfifo(fifo)
    huge = agent.cwd / "huge.log"
    with huge.open("wb") as f:  # sparse: no disk used
        f.truncate(attachments.MAX_ATTACHMENT_BYTES + 1)
    cases = {
        str(fifo): "a FIFO, not a regular file",  # in the workspace: read as the agent's reads
        "/dev/zero": ": a character device, not a regular file",
        str(agent.cwd): "a directory",
        str(huge): f"over the limit of {attachments.MAX_ATTACHMENT_BYTES:,}",
    }
    async with agent.session() as session:
        for url, message in cases.items():
            with pytest.raises(PromptError, match=message):
                await session.prompt([{"type": "text", "text": "x"}, {"type": "file", "url": url}])
    assert agent.sent("session/prompt") == []


async def test_a_prompts_files_together_are_bounded(agent: Agent, monkeypatch) -> None:
    """Each file under the limit, all of them over the prompt's: refused, nothing sent."""
    from acp_notebook.client import attachments

    monkeypatch.setattr(attachments, "MAX_PROMPT_ATTACHMENT_BYTES", 5_000)
    for i in range(3):
        (agent.cwd / f"part{i}.txt").write_text("x" * 2_000)
    files = [{"type": "file", "url": str(agent.cwd / f"part{i}.txt")} for i in range(3)]
    async with agent.session() as session:
        with pytest.raises(PromptError, match="over the limit of 5,000 for one prompt"):
            await session.prompt([{"type": "text", "text": "x"}, *files])
    assert agent.sent("session/prompt") == []


async def test_remote_urls_are_resource_links(agent: Agent) -> None:
    blocks = await sent_blocks(
        agent,
        [
            {"type": "text", "text": "x"},
            {
                "type": "file",
                "url": "https://example.com/a/spec.pdf",
                "media_type": "application/pdf",
            },
        ],
    )
    assert blocks[1] == {
        "type": "resource_link",
        "uri": "https://example.com/a/spec.pdf",
        "name": "spec.pdf",
        "mimeType": "application/pdf",
    }


async def test_acp_blocks_are_filtered_by_prompt_capabilities(agent: Agent) -> None:
    image = {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}
    resource = {"type": "resource", "resource": {"uri": "file:///x/y.txt", "text": "t"}}
    async with agent.session() as session:
        # An image without a uri has nothing to downgrade to: refused before sending.
        with pytest.raises(PromptError, match="image"):
            await session.prompt([{"type": "text", "text": "x"}, image])
        result = await (await session.prompt([{"type": "text", "text": "x"}, resource])).finished
    assert result.success, result
    (prompt,) = agent.sent("session/prompt")
    assert prompt["params"]["prompt"][1] == {
        "type": "resource_link",
        "uri": "file:///x/y.txt",
        "name": "y.txt",
    }


async def test_acp_blocks_pass_through_when_allowed(agent: Agent) -> None:
    image = {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}
    resource = {"type": "resource", "resource": {"uri": "file:///x/y.txt", "text": "t"}}
    blocks = await sent_blocks(
        agent,
        [{"type": "text", "text": "x"}, image, resource],
        "--prompt-capabilities",
        "image,embedded",
    )
    assert blocks[1:] == [image, resource]


async def test_a_prompt_of_only_a_file_or_context_is_not_empty(agent: Agent) -> None:
    path = agent.cwd / "f.txt"
    path.write_text("x")
    blocks = await sent_blocks(
        agent, [{"type": "text", "text": ""}, {"type": "file", "url": str(path)}]
    )
    assert [b["type"] for b in blocks] == ["resource_link"]  # the empty text part is dropped
