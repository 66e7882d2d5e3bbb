"""The model browser's "try it" for generative models: the reply streams into the form.

A model is generative here when its config says it is decoupled (one request, 0..N responses)
and it takes a prompt (``text_input``, or its only BYTES input). Its form then shows the prompt
alone (the model's defaults apply to the rest) and "Run" streams the reply into the form's
result, drawn as :meth:`Session.generate <nbinfer.Session.generate>` draws it, through its
``display=`` callback: the browser's result widget is updated in place as tokens arrive. A
failure mid-stream leaves the text so far and the error in the result.

Layer: notebook; imports errors and the session's generate module (for the prompt rule).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from nbinfer.errors import NbinferError
from nbinfer.protocol.types import ModelMetadata
from nbinfer.session.generate import TEXT_INPUT

__all__ = ["generative_prompt", "stream_into"]


def generative_prompt(session: Any, name: str, version: str, meta: ModelMetadata) -> str | None:
    """The prompt input of a generative (decoupled, text in) model, else None."""
    try:
        config = session.client.get_model_config(name, version)
    except NbinferError:
        return None
    if not (config.get("model_transaction_policy") or {}).get("decoupled"):
        return None
    names = [spec.name for spec in meta.inputs]
    if TEXT_INPUT in names:
        return TEXT_INPUT
    texts = [spec.name for spec in meta.inputs if spec.datatype == "BYTES"]
    return texts[0] if len(texts) == 1 else None


def stream_into(session: Any, model: str, prompt: np.ndarray[Any, Any], widget: Any) -> None:
    """Stream ``model``'s reply to ``prompt`` (the form's tensor) into ``widget.value`` (HTML)."""
    first = prompt.reshape(-1)[0] if prompt.size else b""
    text = first.decode("utf-8", "replace") if isinstance(first, bytes) else str(first)

    def show(bundle: dict[str, str]) -> None:
        widget.value = bundle["text/html"]

    with contextlib.suppress(NbinferError):  # the drawing shows the text so far and the error
        session.generate(model, text, display=show, show_prompt=True)
