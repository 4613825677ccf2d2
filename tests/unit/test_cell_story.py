"""A named session's story (`notebook/cell_forks.py`): the cells whose turns make its
conversation, in the order they ran, each with its fork point; bounded, and read back from
`sessions.json` (which the agent can write) as hostile input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acp_notebook.notebook.cell_forks import MAX_ID, MAX_POINTS, Point, Story
from acp_notebook.notebook.stored_sessions import MAX_FILE_BYTES, SessionStore, Stored


def cells(story: Story) -> list[str]:
    return [p.cell for p in story.points]


def test_a_rerun_cuts_the_story_after_the_cell_and_keeps_its_point() -> None:
    story = Story()
    for cell in ("c1", "c2", "c3"):
        story.append(cell, f"p-{cell}")
    at = story.find("c2")
    assert at == 1
    assert story.rerun(at) == ["p-c3"]  # the points that left: nothing forks from them again
    assert story.points == [Point("c1", "p-c1"), Point("c2", "p-c2")]
    assert story.append("c3", "p-c3'") == []  # c3 left the story: it goes on at the end
    assert cells(story) == ["c1", "c2", "c3"] and story.points[2].session_id == "p-c3'"


def test_a_cell_appended_again_leaves_its_old_place() -> None:
    story = Story([Point("a", "1"), Point("b", "2"), Point("c", "3")])
    assert story.append("b", "4") == ["2"]
    assert story.points == [Point("a", "1"), Point("c", "3"), Point("b", "4")]


def test_the_story_keeps_the_newest_cells() -> None:
    story = Story()
    gone = [p for i in range(MAX_POINTS + 7) for p in story.append(f"c{i}", f"p{i}")]
    assert gone == [f"p{i}" for i in range(7)]
    assert len(story.points) == MAX_POINTS
    assert story.points[0].cell == "c7" and story.find("c0") is None


@pytest.mark.parametrize(
    "value",
    [
        None,
        "c1",
        {"c1": "p"},
        [["c1"]],
        [["c1", "p", "x"]],
        [[1, "p"]],
        [["", "p"]],
        [["c1", 5]],
        [["x" * (MAX_ID + 1), "p"]],
        [["c1", "p" * (MAX_ID + 1)]],
    ],
)
def test_a_story_not_well_formed_is_left_out(value: Any) -> None:
    assert Story.from_json(value).points == []


def test_a_story_reads_back_what_it_wrote_and_no_more_than_its_bound() -> None:
    story = Story([Point("a", "1"), Point("b", None)])
    assert Story.from_json(story.to_json()).points == story.points
    many = [[f"c{i}", f"p{i}"] for i in range(MAX_POINTS * 3)]
    assert len(Story.from_json(many).points) == MAX_POINTS
    mixed = [["a", "1"], "junk", ["b", None], [None, "2"]]
    assert cells(Story.from_json(mixed)) == ["a", "b"]


def test_the_sessions_file_keeps_a_story_with_its_session(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.put("nb", "s", "a", "sid", story=(Point("c1", "p1"), Point("c2", None)))
    entry = SessionStore(tmp_path).find("nb", "s", "a")
    assert entry is not None and entry.story == (Point("c1", "p1"), Point("c2", None))
    # An entry whose story is malformed keeps its session, without the story's bad points.
    path = tmp_path / ".acp_notebook" / "sessions.json"
    data = json.loads(path.read_text())
    data["sessions"][0]["story"] = [["c1", {"x": 1}], ["c2", "p2"], 7]
    path.write_text(json.dumps(data))
    entry = SessionStore(tmp_path).find("nb", "s", "a")
    assert entry is not None and entry.session_id == "sid" and entry.story == (Point("c2", "p2"),)


def test_stories_never_make_a_file_its_reader_refuses(tmp_path: Path) -> None:
    story = tuple(Point(f"{i:0{MAX_ID}d}", f"{i:0{MAX_ID}d}") for i in range(MAX_POINTS))
    store = SessionStore(tmp_path)
    names = [f"s{i}" for i in range(60)]  # 60 entries of 20 KB: past the file's bound
    for name in names:
        store.put("nb", name, "a", "sid", story=story)
    size = (tmp_path / ".acp_notebook" / "sessions.json").stat().st_size
    assert size <= MAX_FILE_BYTES
    kept = SessionStore(tmp_path).entries()
    assert not store.problems and kept and kept[0].name == names[-1]  # the newest stay
    assert all(isinstance(e, Stored) and len(e.story) == MAX_POINTS for e in kept)
