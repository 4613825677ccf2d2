"""Pure rendering of a turn transcript into a Jupyter mimebundle. No I/O, no IPython.

    bundle = render_bundle(result.to_json())              # a finished turn
    bundle = render_bundle(live_transcript, live=True)    # while it streams

The bundle holds `text/markdown` (the answer, then a compact record), `text/html` (the rich
view), `text/plain`, and the transcript itself under `MIME_TRANSCRIPT`, so a saved notebook can
be read, diffed and replayed (a cell's record leaves the Markdown out: `RECORD_FORMATS`). The
transcript is read back into the fold's own parts (`protocol.turn.read_turn`) and drawn
from them; it may be malformed (a saved notebook, an older version): reading and rendering never
raise.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any

from ..protocol.turn import Transcript, read_turn
from .html import render_html
from .markdown import render_markdown
from .text import render_text

__all__ = [
    "ALL_FORMATS",
    "LIVE_FORMATS",
    "MIME_CELL",
    "MIME_TRANSCRIPT",
    "RECORD_FORMATS",
    "render_bundle",
    "render_html",
    "render_markdown",
    "render_text",
]

MIME_TRANSCRIPT = "application/vnd.acp-notebook.turn+json"
#: A cell the agent inserted in a turn of `acp-notebook run` (`kernel_tools/notebook_edit.py`):
#: a display message of the turn's cell that the runner takes out and saves as a cell below it
#: (`run/execute.py`), never an output.
MIME_CELL = "application/vnd.acp-notebook.cell+json"


#: What a streaming update carries: enough to watch. The final update adds Markdown and the
#: transcript, which would otherwise be re-sent whole (with the text twice) every redraw.
LIVE_FORMATS = ("text/plain", "text/html")
ALL_FORMATS = ("text/plain", "text/markdown", "text/html", MIME_TRANSCRIPT)
#: What a cell's record keeps (issue 12: a record at most 3x its visible text). No front-end
#: shows its `text/markdown` while `text/html` is there (JupyterLab trusted or not, nbconvert
#: HTML and Markdown, VS Code, GitHub all rank HTML first), so it would be a third copy of the
#: text nobody reads; nbconvert's LaTeX/PDF, which skips HTML, falls back to `text/plain`.
RECORD_FORMATS = ("text/plain", "text/html", MIME_TRANSCRIPT)


def render_bundle(
    transcript: dict[str, Any],
    *,
    live: bool = False,
    formats: tuple[str, ...] = ALL_FORMATS,
    open_parts: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The mimebundle for one turn: markdown, HTML, plain text and the transcript (the HTML with
    the cards of `open_parts` expanded)."""
    try:
        turn = read_turn(transcript, live=live)
    except Exception as exc:  # read_turn is total; this guards a display against a bug in it
        turn = read_turn({"error": f"could not read the transcript: {exc!r}"}, live=live)
    bundle: dict[str, Any] = {}
    if "text/plain" in formats:
        bundle["text/plain"] = _safely(
            render_text, turn, lambda e: f"(could not render the turn: {e!r})"
        )
    if "text/markdown" in formats:
        bundle["text/markdown"] = _safely(
            render_markdown, turn, lambda e: f"*could not render the turn: {type(e).__name__}*"
        )
    if "text/html" in formats:
        bundle["text/html"] = _safely(
            # A finished turn's HTML is a record: it carries its stylesheet (render/style.py).
            lambda t: render_html(t, open_parts=open_parts, styled=not live),
            turn,
            lambda e: f"<pre>could not render the turn: {escape(repr(e))}</pre>",
        )
    if MIME_TRANSCRIPT in formats:
        bundle[MIME_TRANSCRIPT] = transcript if isinstance(transcript, dict) else {}
    return bundle


def _safely(
    view: Callable[[Transcript], str], turn: Transcript, fallback: Callable[[Exception], str]
) -> str:
    try:
        return view(turn)
    except Exception as exc:  # a display must not take the cell down; the tests keep this unused
        return fallback(exc)
