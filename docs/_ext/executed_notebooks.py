"""mkdocs hook: render the notebooks from copies executed beforehand, instead of running them again.

With ``NBINFER_DOCS_NOTEBOOKS=DIR`` (and ``NBINFER_DOCS_EXECUTE=false``), each page
``notebooks/NAME.ipynb`` is rendered from ``DIR/NAME.ipynb``: the notebook as an earlier step
executed it (``.ci/run``'s nbconvert pass; the binder kernel of ``tests/test_docs_site.py``).
A notebook missing from DIR fails the build, naming it. The site's download link still offers the
committed notebook (clean, without outputs). Without the variable nothing changes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

ENV = "NBINFER_DOCS_NOTEBOOKS"
_COMMITTED: dict[str, str] = {}


def on_files(files: Any, config: Any) -> Any:
    """Point each notebook page at its executed copy in ``$NBINFER_DOCS_NOTEBOOKS``."""
    folder = os.environ.get(ENV)
    if not folder:
        return files
    for file in files:
        src = str(file.src_uri)
        if not (src.startswith("notebooks/") and src.endswith(".ipynb")):
            continue
        executed = Path(folder) / Path(src).name
        if not executed.is_file():
            raise FileNotFoundError(f"{ENV}={folder}: no executed copy of {src} ({executed})")
        _COMMITTED[str(executed)] = file.abs_src_path
        file.abs_src_path = str(executed)
    return files


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """After rendering, the page's source is the committed notebook again (its download link)."""
    committed = _COMMITTED.get(str(page.file.abs_src_path))
    if committed is not None:
        page.file.abs_src_path = committed
    return html
