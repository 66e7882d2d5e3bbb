"""Cards of what a server holds: model metadata, server metadata, a model, a session, statistics.

Layer: render (pure, duck-typed): imports nothing of nbinfer outside :mod:`nbinfer.render`.
A model handle and a session are drawn from what they already hold, which their repr hooks
hand over as ``held`` (their last reads): a repr never calls the server, and the renderer reads
no private attribute of the objects it draws. Metadata is anything with ``name``,
``platform``, ``versions``, ``parameters``, ``inputs`` and ``outputs`` (specs with ``name``,
``datatype``, ``shape``); statistics any frame with ``to_dict("records")``.

Example::

    from nbinfer.render.cards import render_metadata
    html = render_metadata(session.client.get_model_metadata("iris"))
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from nbinfer.render.html import (
    COLLAPSE_AFTER,
    Html,
    badge,
    bars,
    card,
    chips,
    code_spans,
    escape,
    facts,
    legend,
    section,
    table,
)

__all__ = [
    "LATENCY_PARTS",
    "STATS_NOTE",
    "connect_snippet",
    "metadata_bundle",
    "model_bundle",
    "render_metadata",
    "render_model",
    "render_server_metadata",
    "render_session",
    "render_stats",
    "server_metadata_bundle",
    "session_bundle",
    "stats_bundle",
    "stats_text",
]


def _spec_rows(specs: Sequence[Any], labels: Mapping[str, Sequence[str]]) -> Html:
    rows = [
        (
            Html(f"<code>{escape(s.name)}</code>"),
            s.datatype,
            s.shape,
            f"{len(labels[s.name])} labels" if s.name in labels else "",
        )
        for s in specs
    ]
    header = ("name", "datatype", "shape", "labels" if labels else "")
    return table(header, rows)


def _tensor_sections(meta: Any, labels: Mapping[str, Sequence[str]] = {}) -> Html:
    return Html(
        section("Inputs", _spec_rows(meta.inputs, {}), count=len(meta.inputs))
        + section("Outputs", _spec_rows(meta.outputs, labels), count=len(meta.outputs))
    )


def render_metadata(meta: Any) -> Html:
    """Model metadata: platform, versions, parameters and the inputs / outputs tables."""
    info = facts(
        {
            "platform": meta.platform,
            "versions": ", ".join(meta.versions),
            **{k: v for k, v in meta.parameters.items()},
        }
    )
    return card("ModelMetadata", meta.name, info + _tensor_sections(meta), text=repr(meta))


def render_server_metadata(meta: Any) -> Html:
    """Server metadata: name, version and protocol extensions."""
    body = section("Extensions", chips(meta.extensions), count=len(meta.extensions))
    return card("ServerMetadata", meta.name, body, text=repr(meta), sub=meta.version)


def _batching(config: Mapping[str, Any]) -> dict[str, Any]:
    """Batching and instance facts from a Triton-shaped model config."""
    out: dict[str, Any] = {}
    if "max_batch_size" in config:
        out["max batch"] = config["max_batch_size"] or "no batching"
    dynamic = config.get("dynamic_batching")
    if isinstance(dynamic, Mapping):
        preferred = dynamic.get("preferred_batch_size") or []
        delay = dynamic.get("max_queue_delay_microseconds")
        out["dynamic batching"] = ", ".join(
            p
            for p in (
                f"preferred {preferred}" if preferred else "on",
                f"max delay {delay} µs" if delay else "",
            )
            if p
        )
    groups = config.get("instance_group") or []
    if groups:
        out["instances"] = ", ".join(
            f"{g.get('count', 1)} x {str(g.get('kind', 'KIND_AUTO')).removeprefix('KIND_')}"
            for g in groups
            if isinstance(g, Mapping)
        )
    if config.get("backend"):
        out["backend"] = config["backend"]
    return out


def _state_badge(state: str) -> Html:
    tone = {"READY": "ok", "UNAVAILABLE": "err", "LOADING": "warn", "UNLOADING": "warn"}
    return badge(state or "unknown", tone.get(state.upper(), "muted"))


def _error_line(exc: BaseException) -> Html:
    return Html(f'<div class="nbi-err">{escape(type(exc).__name__)}: {escape(exc)}</div>')


def _refresh_line(what: str) -> Html:
    return Html(f'<div class="nbi-muted">{code_spans(what)}</div>')


def render_model(handle: Any, held: Mapping[str, Any] | None = None) -> Html:
    """A model handle: readiness, platform, batching, inputs / outputs, labels, config.

    Drawn from ``held``, what the handle holds from its last read (``metadata``, ``config``,
    ``labels``, ``ready``, or the ``error`` that read ended with; empty: not read yet), and
    its ``name`` / ``version``: no call to the server.
    """
    text = repr(handle)
    held = held or {}
    error = held.get("error")
    if error is not None:
        return card("Model", handle.name, _error_line(error), text=text)
    meta: Any = held.get("metadata")
    if meta is None:
        hint = _refresh_line("Not read yet: `handle.refresh()` reads its metadata and config.")
        return card("Model", handle.name, hint, text=text)
    config: Mapping[str, Any] = held.get("config") or {}
    labels: Mapping[str, Sequence[str]] = held.get("labels") or {}
    info = facts(
        {
            "platform": meta.platform,
            "versions": ", ".join(meta.versions),
            **_batching(config),
        }
    )
    body = [info, _tensor_sections(meta, labels)]
    for output, names in labels.items():
        shown = ", ".join(names[:50]) + (" …" if len(names) > 50 else "")
        body.append(section(f"Labels of {output}", escape(shown), count=len(names), open=False))
    if config:
        dump = json.dumps(config, indent=2, default=str)
        body.append(
            section("Config", Html(f'<pre class="nbi-pre">{escape(dump)}</pre>'), open=False)
        )
    ready = held.get("ready")
    state = "" if ready is None else _state_badge("READY" if ready else "UNAVAILABLE")
    sub = Html((f"version {escape(handle.version)} " if handle.version else "") + state)
    return card("Model", handle.name, "".join(body), text=text, sub=sub)


def render_session(session: Any, held: Mapping[str, Any] | None = None) -> Html:
    """A session: where it points, the server's name / version / extensions, the models.

    Drawn from ``held``, what the session holds from its last reads (``closed``,
    ``replaced_by``: the URL of the newer Session that closed it, ``capabilities``: the
    server's record, ``listing``: the last model list or the error it ended with; missing:
    not read yet), and its ``url`` / ``protocol`` / ``server`` / ``token``: no call to the
    server.
    """
    held = held or {}
    text = repr(session)
    where = "local server" if session.server is not None else "remote server"
    if held.get("closed"):
        state = "closed"
        replaced_by = held.get("replaced_by")
        if replaced_by:  # a newer local Session() closed it
            state = f"replaced by a newer Session ({replaced_by}): closed, server stopped"
        return card("Session", session.url, facts({"state": state}), text=text, sub=where)
    parts: list[str] = []
    caps = held.get("capabilities")
    if caps is None:
        parts.append(facts({"protocol": session.protocol}))
        parts.append(
            _refresh_line("Nothing read from the server yet: `session.refresh()` reads it.")
        )
        return card("Session", session.url, "".join(parts), text=text, sub=where)
    if caps.error is not None:
        body = _error_line(caps.error) + _refresh_line("`session.refresh()` reads it again.")
        return card("Session", session.url, body, text=text, sub=where)
    parts.append(facts({"server": f"{caps.name} {caps.version}", "protocol": session.protocol}))
    parts.append(
        section("Extensions", chips(caps.extensions), count=len(caps.extensions), open=False)
    )
    listed = held.get("listing")  # the last session.models read
    if isinstance(listed, BaseException):  # the last listing failed
        parts.append(section("Models", _error_line(listed)))
    elif listed is None:
        hint = "Not listed yet: `session.models` (or `session.refresh()`) lists them."
        parts.append(section("Models", _refresh_line(hint)))
    else:
        columns = tuple(str(c) for c in listed.columns)
        rows = [
            tuple(
                Html(f"<code>{escape(str(v))}</code>")
                if c == "name"
                else _state_badge(str(v))
                if c == "state"
                else v
                for c, v in zip(columns, row, strict=True)
            )
            for row in listed.itertuples(index=False)
        ]
        models = table(columns, rows)
        note = listed.attrs.get("note")  # a partial listing says why, and how to list them all
        if note:
            models = Html(f'<div class="nbi-warn">{escape(note)}</div>{models}')
        parts.append(section("Models", models, count=len(rows), open=len(rows) <= COLLAPSE_AFTER))
    if session.server is not None and session.server.running:  # a dead one has no ports
        snippet = connect_snippet(session)
        parts.append(section("Connect", Html(f'<pre class="nbi-pre">{escape(snippet)}</pre>')))
    return card("Session", session.url, "".join(parts), text=text, sub=where)


def connect_snippet(session: Any) -> str:
    """How tritonclient / curl / nbinfer reach a session's local server, token included.

    The token's value is never written out: the snippet reads ``session.token`` (the way
    Jupyter keeps its own token out of notebook outputs), so a saved or shared notebook does
    not carry a live credential.
    """
    server = session.server
    if server is None or not server.running:
        return ""
    http_url, grpc_address = server.http_url, server.grpc_address
    http_hostport = http_url.split("://", 1)[-1]
    if session.token is None:
        return (
            "# no token (auth_token=None): any local user can call this server\n"
            f"curl {http_url}/v2/models/add_sub\n"
            f'httpclient.InferenceServerClient("{http_hostport}")  # tritonclient.http\n'
            f'grpcclient.InferenceServerClient("{grpc_address}")  # tritonclient.grpc'
        )
    return (
        "# the server requires its token; read it from session.token (not printed here)\n"
        "auth = {'authorization': f'Bearer {session.token}'}  # lower case for gRPC\n"
        f'httpclient.InferenceServerClient("{http_hostport}").infer(..., headers=auth)\n'
        f'grpcclient.InferenceServerClient("{grpc_address}").infer(..., headers=auth)\n'
        f'nbinfer.Client("{http_url}", auth=session.token)\n'
        "# curl from a notebook cell (IPython puts the value of {session.token} in):\n"
        f'!curl -H "Authorization: Bearer {{session.token}}" {http_url}/v2/models/add_sub'
    )


# -- statistics ----------------------------------------------------------------------------

#: The latency breakdown: label and statistics-frame column (mean ms per request).
LATENCY_PARTS = (
    ("queue", "queue_ms"),
    ("compute input", "compute_input_ms"),
    ("infer", "compute_infer_ms"),
    ("output", "compute_output_ms"),
)


#: What the counts mean, for the card's footnote and the plain-text twin.
STATS_NOTE = (
    "requests: answered; executions: model runs (a dynamic batch is one); inferences: batch "
    "elements, as Triton counts them. A model that does not batch (`max_batch_size` 0, like "
    "`iris`) counts one inference per request whatever rows it carries: the statistics "
    "extension does not count rows then. —: not used yet."
)


def _used(row: Mapping[str, Any]) -> bool:
    return int(row.get("success", 0) or 0) > 0


def _mean_ms(row: Mapping[str, Any], column: str = "success_ms") -> str:
    """Mean milliseconds with 3 decimals, or — for a model with no successful request yet."""
    if not _used(row):
        return "—"
    value = float(row.get(column, 0.0) or 0.0)
    return f"{value:.3f}" if math.isfinite(value) else "—"


def stats_text(frame: Any) -> str:
    """The plain-text twin of :func:`render_stats`: the table (— for unused models) and note."""
    if not hasattr(frame, "copy") or not hasattr(frame, "to_string"):
        return repr(frame)
    shown = frame.copy()
    records = frame.to_dict("records")
    for column in shown.columns:
        if str(column).endswith("_ms"):
            shown[column] = [_mean_ms(r, column) for r in records]
    text = f"{shown.to_string()}\n{STATS_NOTE.replace('`', '')}"
    counts = _replica_counts(frame)
    if counts:
        lines = [" ".join(f"{k}={c.get(k)}" for k in _COUNT_KEYS) for c in counts]
        text += "\nThis session's calls per replica:\n" + "\n".join(lines)
    return text


#: The client-side counts per replica the card shows (``attrs["replicas"]``), in order.
_COUNT_KEYS = ("url", "state", "outstanding", "requests", "infers", "failures", "retried")
#: How a replica's state reads in the card.
_TONES = {"up": "ok", "healthy": "ok", "down": "err", "skipped": "err", "error": "warn"}


def _replica_counts(frame: Any) -> list[Mapping[str, Any]]:
    counts = getattr(frame, "attrs", {}).get("replicas") or []
    return [c for c in counts if isinstance(c, Mapping)]


def _host(url: Any) -> str:
    """A replica's URL without its scheme (the chart's labels are short)."""
    return str(url).split("://", 1)[-1]


def _replica_cell(r: Mapping[str, Any]) -> Html:
    state = str(r.get("state", ""))
    host = escape(_host(r.get("replica", "")))
    tone = _TONES.get(state, "muted")
    return Html(f'<span class="nbi-nowrap"><code>{host}</code> {badge(state, tone)}</span>')


def _model_cell(r: Mapping[str, Any]) -> Html:
    if r.get("name", ""):
        return Html(f"<code>{escape(r.get('name', ''))}</code>")
    error = str(r.get("error", "") or "")  # a replica with no row of its own: say why
    short = error if len(error) <= 160 else f"{error[:159]}…"
    return Html(f'<span class="nbi-muted" title="{escape(error)}">{escape(short)}</span>')


def _counts_section(counts: Sequence[Mapping[str, Any]]) -> Html:
    rows = [
        (
            Html(f"<code>{escape(_host(c.get('url', '')))}</code>"),
            badge(c.get("state", ""), _TONES.get(str(c.get("state", "")), "muted")),
            *(c.get(k, 0) for k in _COUNT_KEYS[2:]),
            c.get("last_error", "") or "",
        )
        for c in counts
    ]
    header = ("replica", "health", "in flight", "calls", "inferences", "failures", "retried")
    return section(
        "This session's calls per replica",
        table((*header, "last error"), rows, numeric=tuple(range(2, len(header)))),
        count=len(rows),
        open=len(rows) <= COLLAPSE_AFTER,
    )


def render_stats(frame: Any) -> Html:
    """Inference statistics (``session.stats()``): a table plus a latency breakdown chart.

    ``frame`` is the statistics DataFrame (or any object with ``to_dict("records")``). A frame
    over several replicas (a ``replica`` column) shows each row's replica and state, and the
    session's own calls per replica when ``frame.attrs["replicas"]`` holds them.
    """
    records: list[dict[str, Any]] = frame.to_dict("records")
    replicas = "replica" in getattr(frame, "columns", ())
    # requests their clients gave up: a column only when there are some
    cancel = any(int(r.get("cancel", 0) or 0) for r in records)
    rows = [
        (
            *((_replica_cell(r),) if replicas else ()),
            _model_cell(r),
            r.get("version", ""),
            r.get("success", 0),
            r.get("execution_count", 0),
            r.get("inference_count", 0),
            r.get("fail", 0),
            *((r.get("cancel", 0),) if cancel else ()),
            _mean_ms(r),
        )
        for r in records
    ]
    header = (
        *(("replica",) if replicas else ()),
        "model",
        "version",
        "requests",
        "executions",
        "inferences",
        "fail",
        *(("cancelled",) if cancel else ()),
        "mean ms",
    )
    first = 3 if replicas else 2  # the counts' columns, right-aligned
    body = [
        table(header, rows, numeric=tuple(range(first, len(header)))),
        Html(f'<div class="nbi-muted nbi-note">{code_spans(STATS_NOTE)}</div>'),
    ]
    timed = [r for r in records if _used(r)]
    if timed:
        items = [
            (
                f"{r.get('name', '')} v{r.get('version', '')}"
                + (f" · {_host(r.get('replica', ''))}" if replicas else ""),
                [float(r.get(col, 0.0) or 0.0) for _, col in LATENCY_PARTS],
            )
            for r in timed
        ]
        chart = bars(items, value=lambda segs: f"{sum(segs):.3f} ms")
        body.append(
            section(
                "Latency per request (mean, ms)",
                legend([name for name, _ in LATENCY_PARTS]) + chart,
                open=len(items) <= COLLAPSE_AFTER,
            )
        )
    counts = _replica_counts(frame)
    if counts:
        body.append(_counts_section(counts))
    return card(
        "Statistics", _stats_title(records, replicas), "".join(body), text=stats_text(frame)
    )


def _stats_title(records: Sequence[Mapping[str, Any]], replicas: bool) -> str:
    if not replicas:
        return f"{len(records)} model versions"
    urls = {str(r.get("replica", "")) for r in records}
    states = {str(r.get("replica", "")): str(r.get("state", "")) for r in records}
    ill = ", ".join(
        f"{n} {state}" for state in ("down", "error") if (n := list(states.values()).count(state))
    )
    versions = sum(1 for r in records if r.get("name", ""))
    return f"{versions} model versions on {len(urls)} replicas" + (f" ({ill})" if ill else "")


def _bundle(obj: Any, html: Html, text: str | None = None) -> dict[str, str]:
    return {"text/plain": repr(obj) if text is None else text, "text/html": html}


def metadata_bundle(meta: Any) -> dict[str, str]:
    """``text/plain`` + ``text/html`` of model metadata (its ``_repr_mimebundle_``)."""
    return _bundle(meta, render_metadata(meta))


def server_metadata_bundle(meta: Any) -> dict[str, str]:
    """``text/plain`` + ``text/html`` of server metadata."""
    return _bundle(meta, render_server_metadata(meta))


def model_bundle(handle: Any, held: Mapping[str, Any]) -> dict[str, str]:
    """``text/plain`` + ``text/html`` of a model handle, from what it holds (``held``)."""
    return _bundle(handle, render_model(handle, held))


def session_bundle(session: Any, held: Mapping[str, Any]) -> dict[str, str]:
    """``text/plain`` + ``text/html`` of a session, from what it holds (``held``)."""
    return _bundle(session, render_session(session, held))


def stats_bundle(frame: Any) -> dict[str, str]:
    """``text/plain`` + ``text/html`` of a statistics frame (text only without the columns)."""
    if not hasattr(frame, "to_dict") or "queue_ms" not in getattr(frame, "columns", ()):
        return {"text/plain": repr(frame)}
    return _bundle(frame, render_stats(frame), stats_text(frame))
