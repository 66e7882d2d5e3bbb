"""SketchPad: a small canvas to draw an image with the mouse (the model browser's try-it form).

Layer: the notebook floor. ipywidgets has no canvas, so this is an `anywidget
<https://anywidget.dev>`_ widget: ``static/sketch.js`` (a few dozen lines of our own) draws white
ink on black and, at the end of each stroke, syncs the drawing as a PNG data URL. The browser
offers it for image classifiers with tiny inputs (``digits``: 8 x 8) and falls back to the
upload alone where anywidget is missing (importing this module then fails).

Example::

    pad = SketchPad(size=160)
    pad                 # displays the pad; draw on it
    pad.image()         # the drawing as PNG bytes (None while blank)
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path

import anywidget
import traitlets

from nbinfer.errors import InvalidInputError

__all__ = ["SketchPad"]

_PREFIX = "data:image/png;base64,"


class SketchPad(anywidget.AnyWidget):  # type: ignore[misc,unused-ignore]  # Any without it
    """A square canvas: draw with the mouse; :meth:`image` is the drawing as PNG bytes.

    Attributes:
        png: The drawing as a ``data:image/png;base64,`` URL, ``""`` while blank (set it to
            ``""`` to wipe the pad).
        size: Side of the canvas in pixels.
        pen: Pen width in canvas pixels.
    """

    # Read beside this module (importlib.resources' files("nbinfer.notebook") would import the
    # notebook package, whose extension hook imports the browser, which imports this module).
    _esm = (Path(__file__).parent / "static" / "sketch.js").read_text(encoding="utf-8")
    _css = """
    .nbs-pad { display: flex; flex-direction: column; align-items: flex-start; gap: 4px; }
    .nbs-canvas { touch-action: none; cursor: crosshair; border-radius: 4px;
      border: 1px solid var(--jp-border-color1, #999); background: #000; }
    .nbs-clear { width: auto; min-width: 64px; padding: 0 10px; }
    """
    png = traitlets.Unicode("").tag(sync=True)
    size = traitlets.Int(160).tag(sync=True)
    pen = traitlets.Int(22).tag(sync=True)

    def image(self) -> bytes | None:
        """The drawing as PNG bytes, or ``None`` while the pad is blank.

        Raises:
            InvalidInputError: ``png`` holds something other than a PNG data URL.
        """
        value = str(self.png)
        if not value:
            return None
        if not value.startswith(_PREFIX):
            raise InvalidInputError(f"sketch pad: expected a PNG data URL, got {value[:40]!r}")
        try:
            return base64.b64decode(value[len(_PREFIX) :], validate=True)
        except binascii.Error as exc:
            raise InvalidInputError(f"sketch pad: the drawing is not valid base64 ({exc})") from exc

    def clear(self) -> None:
        """Wipe the pad."""
        self.png = ""
