"""ModelBrowser: an ipywidgets UI over a :class:`~nbinfer.Session`.

Layer: the notebook floor: ipywidgets is imported here; the session and its client are the only way
to the server (never transports or raw I/O). The session never imports this module: the notebook
layer builds the browser over it (:func:`browse`, ``nbinfer.browse(session)``).

``nbinfer.browse(session)`` returns a :class:`ModelBrowser`: the server's models with their
state; for the selected model its metadata, config, statistics, load / unload buttons and a "try
it" form built from the input specs (:mod:`~nbinfer.notebook.editors`: numbers or arrays, text
for BYTES, an image upload for image-like inputs) that runs inference and shows the result. An
image classifier (one image input, labelled scores) gets an upload and, for tiny inputs, a
sketch pad (:mod:`~nbinfer.notebook.sketch`); its Run goes through
:meth:`~nbinfer.Session.classify` and shows the top classes. The HTML inside it comes from the
renderers of :mod:`nbinfer.render`.

It is a view over the session (every call goes through :class:`~nbinfer.Session` or its client,
never raw I/O) and it shows only what the server offers: without the ``model_repository``
extension, or with a restricted repository index, there are no load / unload buttons and the
model list holds what is known (``browse(session, models=[...])`` and the "open" box); without
the ``statistics`` extension there is no statistics tab. Slow work (listing, loading, inference)
runs on one background thread with a busy state, so the kernel stays free; an error in any
callback is shown in the widget. Displaying it never waits for the server: it draws what it
holds (the session's last listing, or "Listing models" until the listing arrives).

Example::

    browser = nbinfer.browse(session)
    browser                      # displays the UI in a notebook
    browser.select("iris")       # the same as clicking it
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import logging
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ipywidgets as W
import numpy as np

from nbinfer.errors import InvalidInputError, NbinferError
from nbinfer.notebook.editors import Editor, PictureEditor, classifier_plan, editor_for
from nbinfer.notebook.generate_try import generative_prompt, stream_into
from nbinfer.protocol.classification import decode_classification, top_k
from nbinfer.protocol.types import ClassificationResult
from nbinfer.render.cards import render_metadata, render_stats
from nbinfer.render.error_card import render_error
from nbinfer.render.html import card, css, escape
from nbinfer.render.tensors import render_classification, render_result

if TYPE_CHECKING:
    from nbinfer.capabilities import Capabilities
    from nbinfer.client import InferResult
    from nbinfer.protocol.types import ModelMetadata
    from nbinfer.session import Session

__all__ = ["ModelBrowser", "browse", "static_bundle"]

logger = logging.getLogger("nbinfer")

#: Classes shown for an image classifier's result.
TOP_CLASSES = 5


# -- a copy that survives saving ---------------------------------------------------------------

#: Fields whose value the static copy shows as text.
_FIELDS = (W.Text, W.Textarea, W.FloatText, W.IntText, W.BoundedFloatText, W.BoundedIntText)


def static_bundle(widget: Any, text: str, **kwargs: Any) -> dict[str, Any]:
    """``widget``'s display bundle plus a static copy of what it shows now.

    JupyterLab draws the live widget (``application/vnd.jupyter.widget-view+json``); where the
    widget cannot be drawn (nbconvert, GitHub, nbviewer, docs pages of a notebook saved without
    widget state) the ``text/html`` copy (its HTML panes, lists, open tab, images and field
    values, with the widget's classes; no buttons) and the ``text/plain`` line ``text`` read
    instead.
    """

    def walk(w: Any) -> str:
        if getattr(w.layout, "display", None) == "none":
            return ""
        classes = escape(" ".join(getattr(w, "_dom_classes", ())))
        if isinstance(w, W.Tab):
            titles = [t or "" for t in w.titles]
            tabs = " &middot; ".join(
                f"<b>{escape(t)}</b>" if i == w.selected_index else escape(t)
                for i, t in enumerate(titles)
            )
            shown = w.children[w.selected_index] if w.selected_index is not None else None
            body = walk(shown) if shown is not None else ""
            tabs = f'<div style="opacity: 0.7; font-size: 12px">{tabs}</div>'
            return f'<div class="{classes}">{tabs}{body}</div>'
        if isinstance(w, W.Box):
            flex = "display: flex; gap: 6px; " if isinstance(w, W.HBox) else ""
            inner = "".join(walk(c) for c in w.children)
            return f'<div class="{classes}" style="{flex}">{inner}</div>' if inner else ""
        if isinstance(w, (W.HTML, W.HTMLMath)):
            return f'<div class="{classes}">{w.value}</div>' if w.value else ""
        if isinstance(w, (W.Select, W.SelectMultiple, W.Dropdown, W.RadioButtons)):
            chosen = w.value if isinstance(w.value, tuple) else (w.value,)
            items = "".join(
                f"<li><b>{escape(label)}</b></li>"
                if value in chosen
                else f"<li>{escape(label)}</li>"
                for label, value in zip(w._options_labels, w._options_values, strict=True)
            )
            return f'<ul class="{classes}" style="list-style: none; padding-left: 4px">{items}</ul>'
        if isinstance(w, W.Image) and w.value:
            data = base64.b64encode(w.value).decode()
            return f'<img class="{classes}" src="data:image/{escape(w.format)};base64,{data}">'
        if isinstance(w, _FIELDS):
            label = f"{escape(w.description)} " if w.description else ""
            return f'<span class="{classes}">{label}<code>{escape(w.value)}</code></span>'
        return ""

    bundle = dict(widget._repr_mimebundle_(**kwargs))
    note = "a live widget: run the cell in a kernel to use it"
    bundle["text/plain"] = f"{text} ({note})"
    bundle["text/html"] = (
        f'{walk(widget)}<div style="font-size: 11px; opacity: 0.7">{escape(text)}: '
        f"a static copy ({note}).</div>"
    )
    return bundle


# -- what the server offers -------------------------------------------------------------------


@dataclass
class _Row:
    name: str
    version: str = ""
    state: str = ""
    reason: str = ""

    @property
    def ready(self) -> bool:
        return self.state.upper() == "READY"


# -- HTML pieces (nbinfer.render's renderers inside the browser's frame) -----------------------


def _error_html(what: str, exc: BaseException) -> str:
    """A visible error: what failed, the server's message, what to try (and a bug's traceback)."""
    parts = [f'<div class="nbb-error"><b>{escape(what)} failed</b>', render_error(exc)]
    if not isinstance(exc, NbinferError):  # a bug, ours or the model's: show where
        trace = "".join(traceback.format_exception(exc))
        parts.append(
            f'<details><summary>traceback</summary><pre class="nbb-pre">{escape(trace)}</pre>'
            "</details>"
        )
    return "".join(parts) + "</div>"


def _top_classes(result: InferResult, labels: dict[str, list[str]], top: int = 5) -> str:
    """Top classes of each labelled score output (first row) as bars."""
    parts = []
    for name, names in labels.items():
        if name not in result:
            continue
        scores = np.asarray(result[name])
        if scores.ndim == 0 or scores.shape[-1] != len(names) or scores.dtype.kind != "f":
            continue
        index, score = top_k(scores.reshape(-1, len(names))[0], top)
        best = [
            ClassificationResult(float(v), int(i), names[i])
            for i, v in zip(index.tolist(), score.tolist(), strict=True)
        ]
        text = ", ".join(f"{c.label} {c.score:.4f}" for c in best)
        parts.append(card("Top classes", name, render_classification(best), text=text))
    return "".join(parts)


def _result_html(result: InferResult, labels: dict[str, list[str]], elapsed: float) -> str:
    head = (
        f'<div class="nbb-label"><span class="nbb-ok">&#10004;</span> '
        f"<b>{escape(result.model_name)}</b> answered in {elapsed * 1e3:.1f} ms</div>"
    )
    drawn = render_result(result, classify=decode_classification)
    return head + _top_classes(result, labels) + drawn


# -- the browser ------------------------------------------------------------------------------


class ModelBrowser:
    """An ipywidgets UI over a session's models; see the module docstring.

    Args:
        session: The session to browse.
        models: Model names to list when the server offers no repository index.
        background: Run server calls on a background thread (the kernel stays free). With
            ``False`` every callback completes before it returns.

    Attributes:
        widget: The root ipywidgets container (what displays).
        capabilities: What the server offers (``session.capabilities``).
    """

    def __init__(
        self, session: Session, *, models: Sequence[str] = (), background: bool = True
    ) -> None:
        self.session = session
        self._known = list(models)
        self._rows: dict[str, _Row] = {}
        self._editors: list[Editor] = []
        self._prompt: str | None = None  # a generative model's prompt input
        self._current: str | None = None
        self._index_error: BaseException | None = None
        #: Why the list holds only known models (the session's note on a server with no listing).
        self._listing_note = ""
        self._pool = (
            concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="nbinfer-browser")
            if background
            else None
        )
        self._pending: list[concurrent.futures.Future[None]] = []
        self._meta_error: BaseException | None = None
        #: Whether load / unload are offered (repository extension and a readable index).
        self.repository_enabled = False
        self._can_unload = True
        self.capabilities = self._read_capabilities()
        self._build()
        held = self._held_rows()
        if held is not None:  # what the session last listed: drawn now, refreshed below
            self._apply_rows(held, indexed=True)
        else:
            self.list_note.value = (
                '<div class="nbb-muted"><span class="nbb-spin"></span> Listing models&hellip;</div>'
            )
        self._task("Listing models", self._refresh_list)

    # -- construction ----------------------------------------------------------------------

    def _read_capabilities(self) -> Capabilities:
        caps = self.session.capabilities
        self._meta_error = caps.error
        if caps.error is not None:
            logger.debug("server metadata unavailable: %s", caps.error)
        return caps

    def _build(self) -> None:
        caps = self.capabilities
        extensions = ", ".join(caps.extensions) or "none advertised"
        self.title = W.HTML(
            f'<div class="nbb-title"><b>Model browser</b> &nbsp;<span class="nbb-muted">'
            f"{escape(caps.name)} {escape(caps.version)} &middot; {escape(self.session.url)}</span>"
            f'</div><div class="nbb-ext">extensions: {escape(extensions)}</div>'
        )
        self.refresh_button = W.Button(
            description="Refresh", icon="refresh", tooltip="Reload the model list"
        )
        # Never narrower than its label: the title wraps instead (no "Re..." at 700 px).
        self.refresh_button.layout = W.Layout(
            width="auto", min_width="max-content", flex="0 0 auto", margin="0 0 0 auto"
        )
        self.refresh_button.on_click(lambda _b: self.refresh())
        self.title.add_class("nbb-titlebox")
        top = W.HBox([self.title, self.refresh_button])
        top.add_class("nbb-top")

        self.model_list = W.Select(options=[], rows=12, layout=W.Layout(width="100%"))
        self.model_list.observe(self._on_pick, names="value")
        self.list_note = W.HTML("")
        self.open_name = W.Text(placeholder="model name", layout=W.Layout(width="130px"))
        self.open_button = W.Button(description="Open", layout=W.Layout(width="64px"))
        self.open_button.on_click(lambda _b: self.open(self.open_name.value))
        self.open_box = W.HBox([self.open_name, self.open_button])
        side = W.VBox(
            [
                W.HTML('<div class="nbb-label"><b>Models</b></div>'),
                self.model_list,
                self.list_note,
                self.open_box,
            ]
        )
        side.add_class("nbb-side")

        self.header = W.HTML("")
        self.header.add_class("nbb-prose")  # wrapped lines at text height, not a widget row's
        self.load_button = W.Button(
            description="Load", icon="upload", button_style="success", tooltip="Load / reload"
        )
        self.unload_button = W.Button(description="Unload", icon="eject", button_style="warning")
        self.load_button.on_click(lambda _b: self.load())
        self.unload_button.on_click(lambda _b: self.unload())
        for b in (self.load_button, self.unload_button):
            b.layout = W.Layout(width="96px")
        self.status = W.HTML("")
        self.actions = W.HBox([self.load_button, self.unload_button, self.status])
        self.error = W.HTML("")

        self.form = W.VBox([])
        self.run_button = W.Button(
            description="Run", icon="play", button_style="primary", tooltip="Run inference"
        )
        self.run_button.layout = W.Layout(width="96px", margin="8px 0")
        self.run_button.on_click(lambda _b: self.run())
        self.result = W.HTML("")
        self.try_it = W.VBox([self.form, self.run_button, self.result])
        self.metadata_view = W.HTML("")
        self.config_view = W.HTML("")
        self.stats_view = W.HTML("")
        pages: list[tuple[str, Any]] = [("Try it", self.try_it), ("Metadata", self.metadata_view)]
        if caps.configuration or not caps.extensions:
            pages.append(("Config", self.config_view))
        if caps.statistics:
            pages.append(("Statistics", self.stats_view))
        self.tabs = W.Tab(children=[p for _, p in pages])
        self.tabs.titles = tuple(t for t, _ in pages)
        self.detail = W.VBox([self.header, self.actions, self.tabs])
        self.detail.layout.display = "none"
        self._placeholder = W.HTML(
            '<div class="nbb-muted">Select a model on the left to see its metadata, config and '
            "statistics, and to try it.</div>"
        )
        main = W.VBox([self.error, self._placeholder, self.detail])
        main.add_class("nbb-main")

        body = W.HBox([side, main], layout=W.Layout(align_items="stretch"))
        body.add_class("nbb-body")  # browser.css: the side narrows, then stacks, in narrow outputs
        style = W.HTML(f"<style>{css()}{css('browser.css')}</style>")
        self.widget = W.VBox([style, top, body])
        self.widget.add_class("nbinfer-browser")
        if self._meta_error is not None:
            self.error.value = _error_html("Reading the server metadata", self._meta_error)

    # -- display ---------------------------------------------------------------------------

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # Drawn from what the browser holds, never waiting for the server: the live widget
        # fills in when the listing arrives, the static copy shows the state at display time.
        return static_bundle(self.widget, repr(self), **kwargs)

    def __repr__(self) -> str:
        return f"<ModelBrowser {self.session.url} ({len(self._rows)} models)>"

    # -- running callbacks -----------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """Whether a server call is under way."""
        return any(not f.done() for f in self._pending)

    def wait(self, timeout: float | None = 60.0) -> None:
        """Block until every started callback has finished (its errors are in the widget)."""
        for future in list(self._pending):
            future.result(timeout)
        self._pending = [f for f in self._pending if not f.done()]

    def close(self) -> None:
        """Close the widgets and stop the background thread."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self.widget.close()

    def _session_closed(self) -> bool:
        """Whether the session was closed (its calls in flight then end cancelled)."""
        return bool(getattr(self.session, "_closed", False))

    def _dropped(self) -> None:
        """A call the session's close overtook: nothing drawn from it; the list says why."""
        self.list_note.value = '<div class="nbb-muted">The session is closed.</div>'

    def _set_busy(self, label: str | None) -> None:
        for button in (
            self.load_button,
            self.unload_button,
            self.run_button,
            self.refresh_button,
            self.open_button,
        ):
            button.disabled = label is not None
        self.unload_button.disabled = label is not None or not self._can_unload
        if label is not None:
            self.status.value = (
                f'<span class="nbb-spin"></span> <span class="nbb-muted">{escape(label)}&hellip;'
                "</span>"
            )

    def _task(self, label: str, work: Callable[[], None], *, error_to: Any = None) -> None:
        """Run ``work`` with a busy state; any exception is shown in the widget."""
        target = self.error if error_to is None else error_to
        self._set_busy(label)
        self.error.value = ""

        def guarded() -> None:
            try:
                work()
                self.status.value = ""
            except Exception as exc:  # every failure is shown, none is swallowed ...
                logger.debug("%s failed", label, exc_info=True)
                if self._session_closed():  # ... but a call the session's close cancelled
                    self._dropped()
                else:
                    target.value = _error_html(label, exc)
                self.status.value = ""
            finally:
                self._set_busy(None)

        if self._pool is None:
            guarded()
            return
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self._pool.submit(guarded))

    # -- the model list --------------------------------------------------------------------

    def refresh(self) -> None:
        """Re-read the model list (and the selected model)."""
        self._task("Listing models", self._refresh_list)

    def _index(self) -> list[_Row] | None:
        """The repository index, or ``None`` (with a note) when the server restricts it."""
        if not self.capabilities.repository:
            return None
        try:
            frame = self.session.models
        except NbinferError as exc:
            if self._session_closed():
                raise  # cancelled by the close: dropped by _task, no note
            self._index_error = exc
            return None
        self._index_error = None
        if frame.attrs.get("complete") is False:  # no listing: the models the session met
            self._known = list(dict.fromkeys([*self._known, *map(str, frame["name"])]))
            self._listing_note = str(frame.attrs.get("note", ""))
            return None
        if "state" not in frame.columns:  # a name-only listing (KServe's /v2/models)
            return self._rows_of(list(frame["name"]))
        return [
            _Row(str(r["name"]), str(r["version"]), str(r["state"]), str(r["reason"]))
            for r in frame.to_dict("records")
        ]

    def _known_rows(self) -> list[_Row]:
        return self._rows_of(self._known)

    def _rows_of(self, names: Sequence[str]) -> list[_Row]:
        rows = []
        for name in dict.fromkeys(names):
            try:
                state = "READY" if self.session.client.is_model_ready(name) else "NOT READY"
            except NbinferError:
                state = "UNKNOWN"
            rows.append(_Row(name, state=state))
        return rows

    def _held_rows(self) -> list[_Row] | None:
        """The session's last full listing (no I/O), or None when it holds none."""
        frame: Any = getattr(self.session, "_listing", None)
        if (
            not self.capabilities.repository
            or not hasattr(frame, "to_dict")
            or frame.attrs.get("complete") is False
            or "state" not in frame.columns
        ):
            return None
        return [
            _Row(str(r["name"]), str(r["version"]), str(r["state"]), str(r["reason"]))
            for r in frame.to_dict("records")
        ]

    def _refresh_list(self) -> None:
        rows = self._index()
        indexed = rows is not None
        if rows is None:
            rows = self._known_rows()
        if self._session_closed():
            self._dropped()
            return
        self._apply_rows(rows, indexed=indexed)
        if self._current in self._rows:
            self._show(self._current)

    def _apply_rows(self, rows: list[_Row], *, indexed: bool) -> None:
        """Show ``rows`` in the model list (no I/O)."""
        self._rows = {r.name: r for r in rows}
        self.repository_enabled = indexed
        self.load_button.layout.display = self.unload_button.layout.display = (
            None if indexed else "none"
        )
        self.open_box.layout.display = "none" if indexed else None
        if indexed:
            self.list_note.value = ""
        elif self._listing_note:
            self.list_note.value = f'<div class="nbb-note">{escape(self._listing_note)}</div>'
        elif self._index_error is not None:
            self.list_note.value = (
                '<div class="nbb-note">The server refused its model index '
                f"(<code>{escape(type(self._index_error).__name__)}</code>: "
                f"{escape(self._index_error)}). Open a model by name; for load / unload pass "
                "credentials to Session (token= / headers=).</div>"
            )
        else:
            self.list_note.value = (
                '<div class="nbb-note">This server offers no model repository: open a model by '
                "name (or pass models=[...] to browse()).</div>"
            )
        options = [(self._label(r), r.name) for r in rows]
        current = self._current
        self.model_list.unobserve(self._on_pick, names="value")
        try:
            self.model_list.options = options
            self.model_list.rows = max(6, min(len(options), 16))
            self.model_list.value = current if current in self._rows else None
        finally:
            self.model_list.observe(self._on_pick, names="value")

    @staticmethod
    def _label(row: _Row) -> str:
        mark = "\u25cf" if row.ready else "\u25cb"
        state = "" if row.ready or not row.state else f"  ({row.state.lower()})"
        return f"{mark} {row.name}{state}"

    @property
    def models(self) -> list[str]:
        """The names in the model list."""
        return list(self._rows)

    # -- selecting a model -----------------------------------------------------------------

    def _on_pick(self, change: dict[str, Any]) -> None:
        if change["new"]:
            self.select(change["new"])

    def select(self, name: str) -> None:
        """Show ``name``: header, metadata, config, statistics and its try-it form."""
        self._current = name
        if self.model_list.value != name and name in self._rows:
            self.model_list.value = name  # fires _on_pick, which calls back here
            return
        self._task(f"Reading {name}", lambda: self._show(name))

    def open(self, name: str) -> None:
        """Add ``name`` to the list (servers without a repository index) and select it."""
        name = name.strip()
        if not name:
            return

        def work() -> None:
            self.session.model(name)  # raises ModelNotFoundError for unknown names
            if name not in self._known:
                self._known.append(name)
            self._current = name
            self._refresh_list()

        self._task(f"Opening {name}", work)

    def _show(self, name: str) -> None:
        row = self._rows.get(name, _Row(name))
        self.detail.layout.display = None
        self._placeholder.layout.display = "none"
        self.result.value = ""
        self.form.children = []
        self.run_button.layout.display = "none"
        self.header.value = self._header_html(row, None)
        if self.repository_enabled:
            self.load_button.description = "Reload" if row.ready else "Load"
            self._can_unload = row.ready
        try:
            meta = self.session.client.get_model_metadata(name, row.version)
        except NbinferError as exc:
            self.metadata_view.value = _error_html("Reading the metadata", exc)
            self.config_view.value = ""
            self.form.children = [
                W.HTML('<div class="nbb-muted">No inputs to try: the model is not available.</div>')
            ]
            self._show_stats(name)
            return
        self.header.value = self._header_html(row, meta)
        self.metadata_view.value = render_metadata(meta)
        self._show_config(name, row.version)
        self._show_stats(name)
        self._editors = self._form_editors(name, row.version, meta)
        self._prompt = generative_prompt(self.session, name, row.version, meta)
        if self._prompt is not None:  # a generative model: the prompt alone, streamed
            self._editors = [ed for ed in self._editors if ed.spec.name == self._prompt]
        rows: list[Any] = []
        for ed in self._editors:
            rows.append(
                W.HTML(
                    f'<div class="nbb-label"><code><b>{escape(ed.spec.name)}</b></code> '
                    f'<span class="nbb-muted">{escape(ed.spec.datatype)} '
                    f"{escape(list(ed.spec.shape))}</span></div>"
                )
            )
            rows.append(ed.widget)
        if not self._editors:
            rows.append(W.HTML('<div class="nbb-muted">The model declares no inputs.</div>'))
        self.form.children = rows
        self.run_button.layout.display = None if self._editors else "none"

    def _header_html(self, row: _Row, meta: ModelMetadata | None) -> str:
        state = row.state or "UNKNOWN"
        cls = (
            "nbb-ready"
            if row.ready
            else ("nbb-bad" if state.upper() in ("UNAVAILABLE", "FAILED") else "")
        )
        reason = f' <span class="nbb-muted">{escape(row.reason)}</span>' if row.reason else ""
        extra = ""
        if meta is not None:
            specs = [f"{s.name} {s.datatype} {list(s.shape)}" for s in meta.inputs]
            facts = {
                "platform": meta.platform or "?",
                "versions": ", ".join(meta.versions) or "-",
                "inputs": "; ".join(specs) or "none declared",
            }
            extra = '<div class="nbb-muted">{}</div>'.format(
                " &middot; ".join(f"{k} <code>{escape(v)}</code>" for k, v in facts.items())
            )
        return (
            f'<div><span class="nbb-h">{escape(row.name)}</span>'
            f'<span class="nbb-badge {cls}">{escape(state)}</span>{reason}</div>{extra}'
        )

    def _show_config(self, name: str, version: str) -> None:
        try:
            config = self.session.client.get_model_config(name, version)
        except NbinferError as exc:
            self.config_view.value = (
                '<div class="nbb-muted">This server gives no configuration for the model '
                f"(<code>{escape(type(exc).__name__)}</code>: {escape(exc)}).</div>"
            )
            return
        text = json.dumps(config, indent=2, sort_keys=False, default=str)
        self.config_view.value = f'<pre class="nbb-pre">{escape(text)}</pre>'

    def _show_stats(self, name: str) -> None:
        if not self.capabilities.statistics:
            return
        try:
            frame = self.session.stats(name)
        except NbinferError as exc:
            self.stats_view.value = (
                '<div class="nbb-note">Statistics are not available from this server '
                f"(<code>{escape(type(exc).__name__)}</code>: {escape(exc)}).</div>"
            )
            return
        self.stats_view.value = render_stats(frame)

    def _form_editors(self, name: str, version: str, meta: ModelMetadata) -> list[Editor]:
        """One editor per input; an image classifier gets the picture form instead."""
        from nbinfer.interop.images import image_sample

        try:
            config = self.session.client.get_model_config(name, version)
        except NbinferError:
            config = {}
        plan = classifier_plan(meta, config, self.session.model(name).labels)
        if plan is None:
            return [editor_for(spec) for spec in meta.inputs]

        def prepare(data: bytes) -> Any:
            return image_sample(meta, config, data, input=plan.input)

        return [PictureEditor(meta.inputs[0], plan, prepare)]

    # -- actions ---------------------------------------------------------------------------

    def _selected(self) -> str:
        if self._current is None:
            raise InvalidInputError("select a model first")
        return self._current

    def _lifecycle(self, verb: str, call: Callable[[str], object]) -> None:
        name = self._current or ""

        def work() -> None:
            call(self._selected())
            self._refresh_list()

        self._task(f"{verb} {name}", work)

    def load(self) -> None:
        """Load (or reload) the selected model."""
        self._lifecycle("Loading", self.session.load)

    def unload(self) -> None:
        """Unload the selected model."""
        self._lifecycle("Unloading", self.session.unload)

    def inputs(self) -> dict[str, np.ndarray[Any, Any]]:
        """The tensors the try-it form holds now.

        Raises:
            InvalidInputError: A field cannot be read as its input's datatype and shape.
        """
        return {ed.spec.name: ed.value() for ed in self._editors}

    def run(self) -> None:
        """Run the selected model on the try-it form's values and show the result."""
        name = self._current or ""
        self.result.value = ""

        def work() -> None:
            model = self._selected()
            picture = self._picture()
            if picture is not None:
                self._classify(model, picture)
                return
            tensors = self.inputs()
            if self._prompt is not None:
                stream_into(self.session, model, tensors[self._prompt], self.result)
                self._show_stats(model)
                return
            started = time.perf_counter()
            result = self.session.infer(model, tensors)
            elapsed = time.perf_counter() - started
            labels = self.session.model(model).labels
            self.result.value = _result_html(result, labels, elapsed)
            self._show_stats(model)

        self._task(f"Running {name}", work, error_to=self.result)

    @property
    def sketch_pad(self) -> Any | None:
        """The selected image classifier's sketch pad (a ``SketchPad``), or ``None``."""
        pads = [ed.pad for ed in self._editors if isinstance(ed, PictureEditor)]
        return pads[0] if pads else None

    def _picture(self) -> bytes | None:
        """The image of an image classifier's form (None for other forms)."""
        pictures = [ed for ed in self._editors if isinstance(ed, PictureEditor)]
        return pictures[0].image() if pictures else None

    def _classify(self, model: str, image: bytes) -> None:
        """Classify ``image`` with ``session.classify`` and show the top classes."""
        from nbinfer.render.gallery import classification_html

        started = time.perf_counter()
        frame = self.session.classify(model, image, top_k=TOP_CLASSES)
        elapsed = time.perf_counter() - started
        head = (
            f'<div class="nbb-label"><span class="nbb-ok">&#10004;</span> '
            f"<b>{escape(model)}</b> answered in {elapsed * 1e3:.1f} ms</div>"
        )
        self.result.value = head + classification_html(frame)
        self._show_stats(model)


def browse(
    session: Session, *, models: Sequence[str] = (), background: bool = True
) -> ModelBrowser:
    """Open the model browser over ``session``: an ipywidgets UI of its server's models.

    The model list with state; for the selected model its metadata, config, statistics,
    load / unload buttons and a "try it" form built from its inputs. What the server does not
    offer is hidden (no repository extension: no load / unload). The notebook layer builds it
    over the session (the session never imports the notebook layer); ``%nbinfer browse`` is
    the same for the magics' session.

    Args:
        session: The session to browse.
        models: Model names to list when the server offers no repository index.
        background: Run server calls on a background thread (the kernel stays free).

    Example::

        nbinfer.browse(session)     # the last expression of a cell displays it
    """
    return ModelBrowser(session, models=models, background=background)
