"""Structured output: `session.prompt(output_type=...)` and `%%agent --schema`.

The scripted agent answers what each test scripts: a valid answer, an invalid one then (its
`next_prompt` step) a valid one on the re-ask, or invalid twice. The client-level tests check
the prompt the agent received, `result.output`, the re-ask's text and the error; the nbclient
test checks a real kernel: the cell's value, `--out`, and a cell that fails with TurnFailed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from acp_notebook import InvalidArgumentError, SchemaError
from acp_notebook.protocol.limits import MAX_ANSWER_CHARS
from acp_notebook.protocol.structured import OutputSpec, extract_json
from tests.agents.script import script
from tests.client_helpers import Agent
from tests.shared_kernel import SharedKernel

pytestmark = [pytest.mark.anyio, pytest.mark.scripted_agent("in_process")]


class City(BaseModel):
    name: str
    population: int


def fenced(value: Any) -> str:
    return f"Here you are:\n\n```json\n{json.dumps(value)}\n```\n"


def prompts(agent: Agent) -> list[list[dict[str, Any]]]:
    return [m["params"]["prompt"] for m in agent.sent("session/prompt")]


async def ask(agent: Agent, text: str, output_type: Any) -> Any:
    async with agent.session() as session:
        turn = await session.prompt(text, output_type=output_type)
        return await turn.finished


async def test_a_valid_answer_is_the_output(agent: Agent) -> None:
    answer = fenced({"name": "Lyon", "population": 522_000})
    result = await ask(agent, script({"say": answer}), City)
    assert result.success, result.error
    assert result.output == City(name="Lyon", population=522_000)
    assert result.output_json == {"name": "Lyon", "population": 522_000}
    # The transcript keeps the JSON form, so a replay can rebuild the object.
    assert result.to_json()["output"] == {"name": "Lyon", "population": 522_000}
    assert OutputSpec.of(City).rebuild(result.to_json()["output"]).value == result.output
    # The schema went with the prompt, as a text block after the user's.
    (sent,) = prompts(agent)
    assert sent[0]["text"].startswith("#script")
    assert "```json" in sent[-1]["text"]
    assert json.dumps(City.model_json_schema(), indent=2) in sent[-1]["text"]


async def test_an_invalid_answer_is_sent_back_once_and_the_second_answer_counts(
    agent: Agent,
) -> None:
    good = fenced({"name": "Oslo", "population": 709_000})
    first = script(
        {"say": fenced({"name": "Oslo", "population": "many"})}, {"next_prompt": [{"say": good}]}
    )
    result = await ask(agent, first, City)
    assert result.success, result.error
    assert result.output == City(name="Oslo", population=709_000)
    _, second_sent = prompts(agent)
    # The re-ask is one text block naming the field and quoting the bad value (clipped repr).
    assert len(second_sent) == 1
    reask = second_sent[0]["text"]
    assert "did not match the JSON schema" in reask
    assert "population" in reask and "'many'" in reask
    # The record shows both answers and the client's note between them.
    assert any("Asking once more" in e for e in result.errors)
    assert result.text.count("Oslo") == 2


async def test_a_second_invalid_answer_fails_the_turn_with_the_error(agent: Agent) -> None:
    # Not JSON at all; the re-ask is echoed ("echo: ..."), which is not JSON either.
    result = await ask(agent, script({"say": "I'd rather not."}), City)
    assert not result.success
    assert result.stop_reason == "end_turn"
    assert result.output is None and "output" not in result.to_json()
    assert result.error.startswith("the answer does not match the schema City: not valid JSON")
    assert len(prompts(agent)) == 2  # asked once more, not more


async def test_a_json_schema_dict_is_validated_with_jsonschema(agent: Agent) -> None:
    schema = {
        "title": "Tags",
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
        "required": ["tags"],
        "additionalProperties": False,
    }
    good = fenced({"tags": ["a", "b"]})
    first = script(
        {"say": fenced({"tags": ["a", "b", "c", "d"]})}, {"next_prompt": [{"say": good}]}
    )
    result = await ask(agent, first, schema)
    assert result.success, result.error
    assert result.output == {"tags": ["a", "b"]} == result.output_json
    reask = prompts(agent)[1][0]["text"]
    assert "tags: fails 'maxItems' 3" in reask
    assert json.dumps(schema, indent=2) in prompts(agent)[0][-1]["text"]


async def test_a_hostile_answer_fails_with_a_bounded_escaped_error(agent: Agent) -> None:
    # A huge answer that is no JSON, with markup and an escape sequence at its start.
    hostile = "<img src=x onerror=alert(1)>\x1b[31m" + "x" * 300_000
    first = script({"say": hostile}, {"next_prompt": [{"huge_say": 3_000_000}]})
    result = await ask(agent, first, City)
    assert not result.success
    assert result.error.startswith("the answer does not match the schema City: ")
    assert len(result.error) < 300
    # The re-ask quotes the first answer as a clipped repr: bounded, the escape made visible.
    reask = prompts(agent)[1][0]["text"]
    assert "not valid JSON" in reask and "'<img src=x onerror=alert(1)>\\x1b[31mxx" in reask
    assert len(reask) < 800 and "\x1b" not in reask


def test_parsing_takes_the_last_json_block_else_the_whole_text() -> None:
    assert extract_json('```json\n{"a": 1}\n```\ntext\n```json\n{"a": 2}\n```') == '{"a": 2}'
    assert extract_json("```\n[1]\n```") == "[1]"
    # A json block wins over a later bare one; an info string after "json" is allowed.
    assert extract_json('```json title="x"\n[2]\n```\n```\n[3]\n```') == "[2]"
    assert extract_json('  {"a": 3}  ') == '{"a": 3}'
    # Many unclosed fences: one linear pass, and the whole text is what is left.
    opened = "```json\n" * 50_000
    assert extract_json(opened) == opened.strip()
    with pytest.raises(ValueError, match="over the"):
        OutputSpec.of(City).check("{" * (MAX_ANSWER_CHARS + 1))
    with pytest.raises(ValueError, match="not valid JSON"):
        OutputSpec.of({"type": "array"}).check("[" * 100_000)  # too deep for the json module


async def test_a_bad_schema_or_a_queued_turn_is_refused_before_anything_is_sent(
    agent: Agent,
) -> None:
    async with agent.session() as session:
        with pytest.raises(SchemaError):
            await session.prompt("hi", output_type={"type": "no such type"})
        with pytest.raises(SchemaError):
            await session.prompt("hi", output_type=object())
        running = await session.prompt(script({"wait_cancel": True}))
        await session.prompt("queued")
        with pytest.raises(InvalidArgumentError, match="queued turn"):
            await session.prompt("hi", output_type=City)
        await running.cancel()
    assert all("no such type" not in json.dumps(p) for p in prompts(agent))


# -- a real kernel ---------------------------------------------------------------------------


def test_schema_cells_in_a_kernel(tmp_path: Path, kernel: SharedKernel) -> None:
    from tests.nb_util import errors, execute, scripted, text

    good = fenced({"name": "Lyon", "population": 522_000})
    agent = f"%%agent --agent {scripted()}"
    tags = script({"say": json.dumps(["a", "b"])})
    cells = [
        "from pydantic import BaseModel\n"
        "class City(BaseModel):\n    name: str\n    population: int\n"
        "TAGS = {'type': 'array', 'items': {'type': 'string'}}",
        f"{agent} --schema City --out r\n{script({'say': good})}",
        "print(repr(r.output), r.to_json()['output'])",
        f"{agent} --schema TAGS\n{tags}",
        "print(_.output)",
        f"{agent} --schema City\n{script({'say': 'no JSON here'})}",
        f"{agent} --schema NOPE\nhi",
    ]
    nb = execute(cells, tmp_path, allow_errors=True, timeout=90, kernel=kernel)
    assert "City(name='Lyon', population=522000)" in text(nb.cells[2])
    assert "{'name': 'Lyon', 'population': 522000}" in text(nb.cells[2])
    assert "['a', 'b']" in text(nb.cells[4])
    failed = dict(errors(nb))
    assert sorted(failed) == [5], {i: text(nb.cells[i]) for i in failed}
    assert failed[5]["ename"] == "TurnFailed"
    assert "does not match the schema City" in failed[5]["evalue"]
    assert "What to try: say more in the prompt" in failed[5]["evalue"]
    shown = text(nb.cells[6])  # a usage error: one line, no traceback
    assert "UsageError" in shown and "--schema NOPE: no pydantic model" in shown, shown
