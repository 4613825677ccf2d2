"""Sphinx configuration of the documentation site (`docs/`), built by `.ci/run` with -W.

Pages are Markdown (MyST). The build must work offline: no intersphinx, no remote assets.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # autodoc imports the checkout's package, installed or not

from acp_notebook import __version__  # noqa: E402

project = "acp_notebook"
author = "acp_notebook contributors"
copyright = "acp_notebook contributors"  # noqa: A001 (Sphinx's name)
release = version = __version__

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
root_doc = "index"

# `#anchor` links to the headings of a page, as GitHub makes them.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# Docstrings write `name` for code, as the Markdown pages do.
default_role = "code"
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "mixed"

html_theme = "pydata_sphinx_theme"
html_title = "acp_notebook"
html_static_path: list[str] = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"**": ["sidebar-nav-bs"]}
highlight_language = "none"  # a fence without a language (synopses, sample output) is text
