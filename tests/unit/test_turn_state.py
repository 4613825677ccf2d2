"""The turn's state machine (protocol/turnstate.py), transition by transition. Pure: no agent."""

from __future__ import annotations

import ast
import itertools

import pytest

from acp_notebook.errors import AcpError, TurnStateError
from acp_notebook.protocol.mutations import Delta, PartUpdated, TurnFinished
from acp_notebook.protocol.turn import TurnRecord, TurnResult
from acp_notebook.protocol.turnstate import (
    END_STATES,
    TRANSITIONS,
    TurnMachine,
    TurnOutcome,
    TurnState,
)
from tests.agents.script import script
from tests.client_helpers import Agent, Watcher
from tests.unit.test_layers import PACKAGE, REPO, load_package

S = TurnState

# An outcome that names each end state.
OUTCOME = {
    S.COMPLETED: TurnOutcome("end_turn"),
    S.FAILED: TurnOutcome(None, "the agent exited"),
    S.CANCELLED: TurnOutcome("cancelled"),
}

# How to reach each state from a new (queued) machine.
PATH: dict[TurnState, list[TurnState]] = {
    S.QUEUED: [],
    S.RUNNING: [S.RUNNING],
    S.CANCELLING: [S.CANCELLING],
    S.COMPLETED: [S.RUNNING, S.COMPLETED],
    S.FAILED: [S.RUNNING, S.FAILED],
    S.CANCELLED: [S.CANCELLING, S.CANCELLED],
}


def _end(machine: TurnMachine, state: TurnState) -> TurnResult:
    record = TurnRecord(turn_id=machine.turn_id)
    return machine.end(record, OUTCOME[state], usage=None, session_id="s1", agent="a")


def _move(machine: TurnMachine, to: TurnState) -> None:
    if to.ended:
        _end(machine, to)
    else:
        machine.advance(to)


def machine_in(state: TurnState) -> TurnMachine:
    machine = TurnMachine("turn-1")
    for step in PATH[state]:
        _move(machine, step)
    assert machine.state is state
    return machine


def test_the_table_names_every_state_and_the_ends_have_no_way_out() -> None:
    assert set(TRANSITIONS) == set(TurnState)
    assert all(not TRANSITIONS[s] for s in END_STATES)
    assert all(TRANSITIONS[s] for s in set(TurnState) - END_STATES)
    assert {s for s in TurnState if s.ended} == END_STATES


ALLOWED = [(a, b) for a in TurnState for b in sorted(TRANSITIONS[a], key=lambda s: s.value)]
REFUSED = [(a, b) for a, b in itertools.product(TurnState, TurnState) if b not in TRANSITIONS[a]]


@pytest.mark.parametrize(("start", "to"), ALLOWED, ids=lambda s: s.value)
def test_every_allowed_transition_works(start: TurnState, to: TurnState) -> None:
    machine = machine_in(start)
    _move(machine, to)
    assert machine.state is to
    assert machine.path[-2:] == (start, to)
    assert machine.ended is to.ended
    assert (machine.result is not None) is to.ended


@pytest.mark.parametrize(("start", "to"), REFUSED, ids=lambda s: s.value)
def test_every_other_transition_is_refused(start: TurnState, to: TurnState) -> None:
    machine = machine_in(start)
    result, path = machine.result, machine.path
    with pytest.raises(TurnStateError, match=f"cannot go from {start.value} to {to.value}"):
        _move(machine, to)
    assert machine.state is start  # nothing moved, nothing was built
    assert machine.path == path
    assert machine.result is result


def test_the_error_is_an_acp_error_and_a_runtime_error() -> None:
    assert issubclass(TurnStateError, AcpError)
    assert issubclass(TurnStateError, RuntimeError)


@pytest.mark.parametrize("end", sorted(END_STATES, key=lambda s: s.value), ids=lambda s: s.value)
def test_an_end_state_is_reached_through_end_only(end: TurnState) -> None:
    machine = machine_in(S.RUNNING)
    with pytest.raises(TurnStateError, match="through end"):
        machine.advance(end)
    assert machine.state is S.RUNNING


@pytest.mark.parametrize("first", sorted(END_STATES, key=lambda s: s.value), ids=lambda s: s.value)
@pytest.mark.parametrize("second", sorted(END_STATES, key=lambda s: s.value), ids=lambda s: s.value)
def test_ending_twice_is_refused_and_changes_nothing(first: TurnState, second: TurnState) -> None:
    machine = machine_in(S.CANCELLING if first is S.CANCELLED else S.RUNNING)
    heard: list[TurnResult] = []
    machine.on_end.append(heard.append)
    result = _end(machine, first)
    with pytest.raises(TurnStateError):
        _end(machine, second)
    assert machine.state is first
    assert machine.result is result
    assert heard == [result]  # the end was announced once


def test_end_builds_the_result_and_tells_the_listeners_in_order() -> None:
    machine = machine_in(S.RUNNING)
    heard: list[tuple[str, TurnResult]] = []
    machine.on_end.append(lambda r: heard.append(("first", r)))
    machine.on_end.append(lambda r: heard.append(("second", r)))
    record = TurnRecord(turn_id="turn-1", prompt=[{"type": "text", "text": "hi"}])
    outcome = TurnOutcome("end_turn", tokens={"totalTokens": 3})
    result = machine.end(record, outcome, usage=None, session_id="s1", agent="echo")
    assert result is machine.result
    assert (result.turn_id, result.success, result.stop_reason, result.error) == (
        "turn-1",
        True,
        "end_turn",
        None,
    )
    assert (result.session_id, result.agent, result.tokens) == ("s1", "echo", {"totalTokens": 3})
    assert result.prompt == ({"type": "text", "text": "hi"},)
    assert heard == [("first", result), ("second", result)]


@pytest.mark.parametrize(
    ("outcome", "state"),
    [
        (TurnOutcome("end_turn"), S.COMPLETED),
        (TurnOutcome("max_tokens"), S.COMPLETED),  # the agent stopped: a completed turn...
        (TurnOutcome("refusal"), S.COMPLETED),  # ...whose result is not a success
        (TurnOutcome("cancelled"), S.CANCELLED),
        (TurnOutcome("cancelled", "the agent was stopped"), S.CANCELLED),
        (TurnOutcome(None, "the agent exited"), S.FAILED),
        (TurnOutcome(None), S.FAILED),
        (TurnOutcome("end_turn", "client error"), S.FAILED),
    ],
)
def test_the_outcome_names_the_end_state(outcome: TurnOutcome, state: TurnState) -> None:
    assert outcome.state is state
    machine = machine_in(S.RUNNING)
    result = machine.end(TurnRecord(turn_id="t"), outcome, usage=None, session_id=None, agent=None)
    assert machine.state is state
    assert result.cancelled is (state is S.CANCELLED)
    assert result.success is (outcome.stop_reason == "end_turn" and outcome.error is None)


@pytest.mark.parametrize(
    ("path", "asked"),
    [
        ([], False),
        ([S.RUNNING], False),
        ([S.RUNNING, S.COMPLETED], False),
        ([S.RUNNING, S.CANCELLED], False),  # the agent stopped on its own: nobody asked
        ([S.CANCELLING], True),
        ([S.CANCELLING, S.CANCELLED], True),  # a queued turn, stopped before it was sent
        ([S.RUNNING, S.CANCELLING, S.COMPLETED], True),  # asked, but the agent finished anyway
    ],
)
def test_cancel_requested_means_the_turn_went_through_cancelling(
    path: list[TurnState], asked: bool
) -> None:
    machine = TurnMachine("t")
    for step in path:
        _move(machine, step)
    assert machine.cancel_requested is asked


# -- the machine inside a real session: what a TurnHandle reports ---------------------------------


@pytest.mark.anyio
async def test_a_session_moves_its_turns_through_the_table(agent: Agent) -> None:
    async with agent.session() as session:
        watcher = Watcher(session)
        first = await session.prompt(script({"say": "working"}, {"wait_cancel": True}))
        # The agent said something: the prompt reached it, the turn runs. (Before that, more
        # input would join the same queued turn.)
        await watcher.wait_for(lambda m: isinstance(m, (Delta, PartUpdated)))
        queued = await session.prompt("behind it")
        assert (first.state, queued.state) == (S.RUNNING, S.QUEUED)
        stopped = await session.stop()
        done = await (await session.prompt("next")).finished
        refused = await session.prompt(script({"error": {"code": -32602, "message": "bad prompt"}}))
        failed = await refused.finished
    assert stopped is first.result and stopped is not None and stopped.cancelled
    assert first.machine.path == (S.QUEUED, S.RUNNING, S.CANCELLING, S.CANCELLED)
    assert queued.machine.path == (S.QUEUED, S.CANCELLING, S.CANCELLED)
    assert queued.cancel_requested and queued.done and queued.result is not None
    assert queued.result.cancelled and queued.result.text == ""  # never sent
    assert done.success
    assert refused.machine.path == (S.QUEUED, S.RUNNING, S.FAILED)
    assert failed.error is not None and "bad prompt" in failed.error
    finished = [m.turn_id for m in watcher.of(TurnFinished)]
    assert finished.count(first.id) == finished.count(queued.id) == 1  # one end each


# -- one place moves the machine, one place ends a turn ---------------------------------------


def test_only_the_turn_runner_moves_a_turn_and_only_its_end_ends_one() -> None:
    # Read from the source: a second place that ends turns (as Session._run's five cancel
    # branches once did) fails here, whatever the tests above exercise.
    moves: dict[str, list[str]] = {"advance": [], "end": []}
    for module in load_package(REPO, PACKAGE).values():
        if module.name == "acp_notebook.protocol.turnstate":
            continue
        for func in ast.walk(module.tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in moves
                    and ast.unparse(node.func.value).endswith("machine")
                ):
                    moves[node.func.attr].append(f"{module.name}.{func.name}")
    assert sorted(set(moves["end"])) == ["acp_notebook.client.runner._end"], moves
    assert sorted(set(moves["advance"])) == [
        "acp_notebook.client.runner.cancel",  # -> CANCELLING
        "acp_notebook.client.runner.work",  # -> RUNNING
    ], moves
