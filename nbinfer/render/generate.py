"""Renderers of text generation: a streamed reply, a chat, a batch's progress.

Pure functions from plain values (strings, numbers, sequences of ``(role, text)``) to HTML or
text; they import nothing of nbinfer's classes, do no I/O and every value passes through
``html.escape``. Colours are JupyterLab's theme variables with neutral fallbacks, so light and
dark themes, VS Code and a saved notebook all read well. The CSS rides inline in each drawing
(an output updated in place must carry it every time).

Layer: render; imports only the standard library.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

__all__ = [
    "CSS",
    "chat_html",
    "chat_text",
    "generation_html",
    "generation_text",
    "progress_html",
    "progress_text",
    "stats_line",
]

#: The styles of every drawing here, scoped under ``.nbi-gen``.
CSS = """<style>
.nbi-gen{--g-fg:var(--jp-content-font-color0,inherit);--g-muted:var(--jp-content-font-color2,
rgba(127,127,127,.95));--g-border:var(--jp-border-color2,rgba(127,127,127,.35));
--g-bg:var(--jp-layout-color0,transparent);--g-alt:var(--jp-layout-color2,rgba(127,127,127,.12));
--g-accent:var(--jp-brand-color1,#3b82f6);--g-err:var(--jp-error-color1,#d9453d);
--g-user:rgba(59,130,246,.2);
color:var(--g-fg);font-family:var(--jp-content-font-family,system-ui,sans-serif);
font-size:var(--jp-content-font-size1,13px);line-height:1.5;max-width:820px;margin:2px 0}
.nbi-gen .g-head{color:var(--g-muted);font-size:11px;margin-bottom:2px}
.nbi-gen .g-head b{color:var(--g-fg);font-weight:600}
.nbi-gen .g-text{white-space:pre-wrap;word-wrap:break-word;border-left:3px solid var(--g-accent);
padding:4px 10px;background:var(--g-bg)}
.nbi-gen .g-prompt{color:var(--g-muted)}
.nbi-gen .g-cursor{display:inline-block;width:.55em;height:1em;vertical-align:text-bottom;
background:var(--g-accent);margin-left:1px;opacity:.75}
.nbi-gen .g-stats{color:var(--g-muted);font-size:11px;margin-top:3px;
font-family:var(--jp-code-font-family,monospace)}
.nbi-gen .g-error{border-left:3px solid var(--g-err);padding:3px 10px;margin-top:4px}
.nbi-gen .g-error b{color:var(--g-err)}
.nbi-gen .g-chat{display:flex;flex-direction:column;gap:6px;padding:4px 0}
.nbi-gen .g-row{display:flex}
.nbi-gen .g-row.user{justify-content:flex-end;text-align:right}
.nbi-gen .user .g-bubble{text-align:left}
.nbi-gen .g-row>div{max-width:78%}
.nbi-gen .g-bubble{padding:6px 11px;border-radius:12px;white-space:pre-wrap;
word-wrap:break-word;border:1px solid var(--g-border)}
.nbi-gen .user .g-bubble{background:var(--g-user);border-bottom-right-radius:3px}
.nbi-gen .assistant .g-bubble{background:var(--g-alt);border-bottom-left-radius:3px}
.nbi-gen .system .g-bubble{background:transparent;color:var(--g-muted);font-style:italic}
.nbi-gen .g-role{font-size:10px;color:var(--g-muted);margin:0 4px 1px}
.nbi-gen .g-bar{height:6px;background:var(--g-alt);border-radius:3px;overflow:hidden;
max-width:420px;margin:4px 0}
.nbi-gen .g-bar>div{height:100%;background:var(--g-accent)}
</style>"""

_CURSOR = '<span class="g-cursor"></span>'


def stats_line(stats: Mapping[str, object]) -> str:
    """``key value · key value`` from the stats a result holds (None values left out)."""
    return " · ".join(f"{k} {v}" for k, v in stats.items() if v is not None and v != "")


def generation_html(
    text: str,
    *,
    model: str,
    state: str = "done",
    stats: Mapping[str, object] | None = None,
    prompt: str = "",
    error: str = "",
) -> str:
    """One generated reply: the text (a cursor while ``state`` is ``"streaming"``), its stats.

    Args:
        text: The text so far.
        model: The model's name (shown in the header).
        state: ``"streaming"``, ``"done"``, ``"error"`` or ``"stopped"``.
        stats: Shown under the text (``{"tokens": 12, "TTFT": "4.1 ms", ...}``).
        prompt: Shown dimmed before the text when given.
        error: The error that ended the stream (``state == "error"``).
    """
    what = {"streaming": "generating…", "error": "failed", "stopped": "stopped"}.get(state, "")
    head = f"<b>{html.escape(model)}</b>" + (f" · {html.escape(what)}" if what else "")
    body = (f'<span class="g-prompt">{html.escape(prompt)}</span>' if prompt else "") + html.escape(
        text
    )
    if state == "streaming":
        body += _CURSOR
    parts = [
        CSS,
        '<div class="nbi-gen">',
        f'<div class="g-head">{head}</div>',
        f'<div class="g-text">{body}</div>',
    ]
    line = stats_line(stats or {})
    if line:
        parts.append(f'<div class="g-stats">{html.escape(line)}</div>')
    if error:
        parts.append(f'<div class="g-error"><b>Error</b> {html.escape(error)}</div>')
    parts.append("</div>")
    return "".join(parts)


def generation_text(
    text: str, *, model: str, stats: Mapping[str, object] | None = None, error: str = ""
) -> str:
    """The plain-text form of :func:`generation_html` (terminals, untrusted notebooks)."""
    out = text
    line = stats_line(stats or {})
    if line:
        out += f"\n[{model}: {line}]"
    if error:
        out += f"\n[error: {error}]"
    return out


def chat_html(
    turns: Sequence[tuple[str, str]],
    *,
    model: str,
    streaming: bool = False,
    stats: Mapping[str, object] | None = None,
    error: str = "",
) -> str:
    """A conversation as bubbles: ``turns`` of ``(role, text)``, role user / assistant / system.

    ``streaming``: the last bubble is still growing (it gets a cursor).
    """
    rows = []
    for i, (role, text) in enumerate(turns):
        kind = role if role in ("user", "assistant", "system") else "assistant"
        cursor = _CURSOR if streaming and i == len(turns) - 1 else ""
        name = html.escape(model if kind == "assistant" else role)
        rows.append(
            f'<div class="g-row {kind}"><div><div class="g-role">{name}</div>'
            f'<div class="g-bubble">{html.escape(text)}{cursor}</div></div></div>'
        )
    if not rows:
        rows.append('<div class="g-head">no messages yet: chat.send("...")</div>')
    parts = [CSS, '<div class="nbi-gen">', '<div class="g-chat">', *rows, "</div>"]
    line = stats_line(stats or {})
    if line:
        parts.append(f'<div class="g-stats">{html.escape(line)}</div>')
    if error:
        parts.append(f'<div class="g-error"><b>Error</b> {html.escape(error)}</div>')
    parts.append("</div>")
    return "".join(parts)


def chat_text(turns: Sequence[tuple[str, str]], *, model: str) -> str:
    """The plain-text form of :func:`chat_html`: one ``role: text`` paragraph per turn."""
    return "\n".join(f"{model if r == 'assistant' else r}: {t}" for r, t in turns)


def progress_html(
    done: int, total: int, *, model: str, errors: int = 0, stats: Mapping[str, object] | None = None
) -> str:
    """A batch's progress: a bar, ``done/total`` rows and the errors so far."""
    share = 100.0 * done / total if total else 100.0
    head = f"<b>{html.escape(model)}</b> · {done}/{total} rows" + (
        f" · {errors} error{'s' if errors != 1 else ''}" if errors else ""
    )
    line = stats_line(stats or {})
    return (
        f'{CSS}<div class="nbi-gen"><div class="g-head">{head}</div>'
        f'<div class="g-bar"><div style="width:{share:.1f}%"></div></div>'
        + (f'<div class="g-stats">{html.escape(line)}</div>' if line else "")
        + "</div>"
    )


def progress_text(
    done: int, total: int, *, model: str, errors: int = 0, stats: Mapping[str, object] | None = None
) -> str:
    """The plain-text form of :func:`progress_html`."""
    line = stats_line(stats or {})
    return f"{model}: {done}/{total} rows, {errors} errors" + (f" ({line})" if line else "")
