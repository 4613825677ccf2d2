"""The prompt as the transcript keeps it (issue 11): context parts as themselves, no second copy
of a payload, no path of the machine."""

from __future__ import annotations

import base64
from pathlib import Path

from acp_notebook.protocol.content import PromptCaps, file_block, normalize
from acp_notebook.protocol.recorded_prompt import recorded


def test_a_context_part_is_kept_as_its_tag_and_body() -> None:
    sent = normalize([{"type": "context", "tag": "variable", "context": "a < b & 'c'"}])
    assert sent[0]["text"] == "<variable>a &lt; b &amp; 'c'</variable>"  # type: ignore[index]
    assert recorded(sent, "/w") == [
        {"type": "context", "tag": "variable", "context": "a < b & 'c'"}
    ]  # type: ignore[arg-type]


def test_payloads_are_left_out_and_paths_made_relative(tmp_path: Path) -> None:
    root = tmp_path / "work"
    png = b"\x89PNG" + bytes(1000)
    caps = PromptCaps(image=True, embedded_context=True)
    inside = file_block(root / ".acp_notebook" / "s" / "a.png", png, "image/png", caps)
    blob = file_block(root / "data.bin", bytes(300), "application/x-thing", caps)
    outside = file_block(tmp_path / "elsewhere" / "notes.bin", bytes(10), "application/x", caps)
    assert base64.b64decode(inside["data"]) == png  # what is sent keeps every byte
    image, resource, other = recorded([inside, blob, outside], str(root))
    assert image == {
        "type": "image",
        "mimeType": "image/png",
        "uri": ".acp_notebook/s/a.png",
        "size": len(png),
        "omitted": "data",
    }
    assert resource["resource"] == {
        "uri": "data.bin",
        "mimeType": "application/x-thing",
        "size": 300,
        "omitted": "blob",
    }
    assert other["resource"]["uri"] == "notes.bin"  # outside the workspace: only its name
    assert str(tmp_path) not in repr([image, resource, other])
