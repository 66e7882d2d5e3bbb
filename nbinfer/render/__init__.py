"""Renderers: pure functions drawing HTML, text and SVG from plain values or duck-typed objects.

Layer: low, beside ``errors``: a renderer imports nothing of nbinfer outside this package (no
class it draws, not even ``nbinfer.errors``), so every layer may import it and each class's
``_repr_mimebundle_`` / ``_repr_html_`` names its renderer here, with no import pointing up
(xarray's ``formatting_html`` is the model). Optional heavy dependencies (Pillow, pandas,
matplotlib) are imported inside the functions that need them. IPython-bound things (widgets,
magics, the error handler) live in :mod:`nbinfer.notebook`.

Modules:

* :mod:`~nbinfer.render.html`: safe markup (``escape``, ``Html``), the theme-aware stylesheet
  (``static/style.css``), tables, sections, cards, bars, thumbnails.
* :mod:`~nbinfer.render.tensors`: tensor previews, top-k bars, the ``InferResult`` card.
* :mod:`~nbinfer.render.cards`: model / server metadata, a model handle, a session, statistics.
* :mod:`~nbinfer.render.error_card`: the error card, the short traceback and ``error_report``.
* :mod:`~nbinfer.render.gallery`: the image grid of a classification frame.
* :mod:`~nbinfer.render.profile`: a load profile's card (inline SVG charts) and its matplotlib
  figure.
* :mod:`~nbinfer.render.generate`: a streamed generation, a chat as a conversation.
* :mod:`~nbinfer.render.stream_profile`: a streaming model's profile (TTFT, inter-token latency).

Every value from a server passes through :func:`~nbinfer.render.html.escape`; colours come from
JupyterLab's ``--jp-*`` theme variables with fallbacks, so light and dark themes both work.
"""
