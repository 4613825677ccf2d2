"""The display layer: what the extension shows in a cell and how, below both the `%%agent` flow
(`notebook/`) and the widgets (`widgets/`), which import it and never each other.

`publish.py` is the one way out (every bundle masked), `masking.py` the kernel's redactor,
`views.py` the HTML and text of commands and widgets, `reprs.py` how results and handles show
when displayed, `live.py` the headless live view and its redraw loop, `live_meter.py` its budget,
`live_turn.py` the running turn both live views draw, masked where it changed.
"""
