"""What a closed progress bar leaves in the notebook: its summary line, in text and in HTML.

Layer: render (pure): stdlib only; imports nothing of nbinfer outside :mod:`nbinfer.render`.
The line takes JupyterLab's code font and its success / error colours (``--jp-*`` variables
with fallbacks), so it reads in light and dark themes, nbconvert and GitHub.

Example::

    from nbinfer.render.progress import summary_bundle
    summary_bundle("100/100 images in 1.2 s", ok=True)
"""

from __future__ import annotations

from nbinfer.render.html import escape

__all__ = ["summary_bundle"]


def summary_bundle(line: str, *, ok: bool) -> dict[str, str]:
    """``text/plain`` + ``text/html`` of a finished bar's line: a tick when ``ok``, else a cross."""
    mark, colour = (
        ("\u2713", "success-color1, #388e3c") if ok else ("\u2717", "error-color1, #d32f2f")
    )
    return {
        "text/plain": line,
        "text/html": (
            '<div class="nbinfer-progress" style="font-family: var(--jp-code-font-family, '
            'monospace); font-size: var(--jp-code-font-size, 13px); padding: 2px 0">'
            f'<span style="color: var(--jp-{colour})">{mark}</span> {escape(line)}'
            "</div>"
        ),
    }
