"""`%agent revert` in JupyterLab after the agent's shell planted links over the turn's writes.

A turn writes `a.py` and creates `b.txt` (copies of `victim.py` and `keep.py`); then, as the
agent's shell would, a cell replaces `b.txt` by a link to `keep.py` and `a.py` by a link to
`victim.py`, and the person runs `%agent revert`; then `a.py` becomes a link to the notebook
itself and the person runs `%agent revert --force`. Each revert shows the files it refused and
why, and the victims, and the notebook, are as they were
(tests/hostile/test_attack_revert.py has the same attack without a browser).
"""

from __future__ import annotations

import json

import nbformat
import pytest

from tests.browser.test_lab import open_and_run, output, shoot
from tests.nb_util import scripted

pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

VICTIM, KEEP = "victim's code\n", "keep me\n"


def test_revert_after_planted_links_refuses_and_leaves_the_victims(page, lab) -> None:
    work = lab[2] / "revert-work"
    work.mkdir(exist_ok=True)
    for name, text in (("a.py", "a before\n"), ("victim.py", VICTIM), ("keep.py", KEEP)):
        (work / name).unlink(missing_ok=True)
        (work / name).write_text(text)
    (work / "b.txt").unlink(missing_ok=True)
    steps = [
        {"request": "fs/write_text_file", "params": {"path": str(work / n), "content": c}}
        for n, c in (("a.py", VICTIM), ("b.txt", KEEP))
    ]
    plant = (
        f"import os\nw = {str(work)!r}\n"
        "for name, target in (('a.py', 'victim.py'), ('b.txt', 'keep.py')):\n"
        "    os.unlink(f'{w}/{name}')\n"
        "    os.symlink(f'{w}/{target}', f'{w}/{name}')"
    )
    to_notebook = (
        f"os.unlink(f'{{w}}/a.py')\nos.symlink({str(lab[2] / 'revert.ipynb')!r}, f'{{w}}/a.py')"
    )
    open_and_run(
        page,
        lab,
        "revert.ipynb",
        f"%%agent --quiet --agent {scripted()}\n#script {json.dumps(steps)}",
        plant,
        "%agent revert",
        to_notebook,
        "%agent revert --force",
        "print('actions', sorted(f.action for f in _agent_revert.files))",
    )
    for index in (2, 4):  # each revert as the person sees it, in turn
        shown = output(page, index).filter(has_text="Revert of turn")
        shown.wait_for(timeout=120_000)
        text = shown.inner_text()
        assert "a.py: refused" in text and "b.txt: refused" in text, text
        assert text.count("symbolic link") >= 2, text
        assert "deleted" not in text and "restored" not in text, text
    actions = output(page, 5).filter(has_text="actions")
    actions.wait_for()
    assert "['refused', 'refused']" in actions.inner_text()
    shoot(page, "revert-refused")
    assert (work / "victim.py").read_text() == VICTIM
    assert (work / "keep.py").read_text() == KEEP
    assert (work / "a.py").is_symlink() and (work / "b.txt").is_symlink()
    notebook = nbformat.read(lab[2] / "revert.ipynb", as_version=4)  # still the notebook
    assert "%agent revert --force" in notebook.cells[4].source
