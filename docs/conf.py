"""Sphinx configuration of coordkit's documentation (``tox -e docs``: warnings are errors).

Sphinx, not MkDocs: coordkit's docstrings are written in Sphinx's own syntax (``:param x:`` field
lists, ``:class:`~coordkit.store.MetadataStore``` roles), which autodoc renders and cross-links as
they are; the pages are Markdown (MyST), the command line is generated from the click commands
(sphinx-click), and the theme is furo.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for folder in ("core", "plugins", "contrib"):
    sys.path.insert(0, str(ROOT / folder))

from coordkit import __version__  # noqa: E402

project = "coordkit"
author = "the coordkit developers"
copyright = "2026, the coordkit developers"
release = __version__
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
    "sphinx_click",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = f"coordkit {release}"
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
# Optional clients are imported lazily by the plugins; the docs need none of them.
autodoc_mock_imports = ["kazoo", "redis", "pyspark", "pandas", "pyarrow", "matplotlib"]
