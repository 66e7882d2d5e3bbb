"""The text generation face of a Session: ``generate``, ``agenerate`` and ``chat``.

:class:`GenerateFront` reads the arguments, finds the model's prompt input (its metadata, read
once), and runs the stream through :mod:`nbinfer.session.generate`'s loop; a DataFrame goes to
:mod:`nbinfer.session.completions`, a conversation to :mod:`nbinfer.session.chat`. The stream
is the session's own client's ``generate_stream`` (HTTP Server-Sent Events or the gRPC
decoupled stream, whichever the session speaks).

May import ``client``, ``errors`` and the session's core, ops, generate, chat and completions.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.types import ModelMetadata
from nbinfer.session.boundary import public
from nbinfer.session.chat import Chat
from nbinfer.session.completions import agenerate_frame, generate_frame
from nbinfer.session.generate import (
    Display,
    _achunks,
    _adrive,
    _chunks,
    _drive,
    _generation_drawer,
    _live,
    _prompt_field,
    _Request,
    _Run,
)
from nbinfer.session.ops import Lookups, aperform, perform

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["GenerateFront"]


#: Guards the creation of a session's gRPC stream clients.
_CLIENTS_LOCK = threading.Lock()


class GenerateFront(Lookups):
    """The text generation half of :class:`~nbinfer.Session` (see the module docstring)."""

    def _request(
        self,
        model: str,
        prompt: str,
        meta: ModelMetadata,
        *,
        version: str,
        parameters: Mapping[str, Any] | None,
        timeout: float | None,
        output: str | None,
        prompt_input: str | None,
        fields: Mapping[str, Any],
    ) -> _Request:
        if not isinstance(prompt, str):
            raise InvalidInputError(
                f"session.generate(): the prompt must be a str or a DataFrame, got "
                f"{type(prompt).__name__}"
            )
        self._meet(model)
        name = prompt_input or _prompt_field(meta, model)
        return _Request(
            model=model,
            version=version,
            prompt=prompt,
            fields={name: prompt, **fields},
            parameters=dict(parameters or {}),
            timeout=timeout,
            output=output,
        )

    def _run(self, req: _Request, display: Display, show_prompt: bool = False) -> _Run:
        draw = _generation_drawer(req.model, req.prompt, show_prompt)
        live = _live(display, draw, req.prompt if show_prompt else "")
        return _Run(req.model, req.version, req.prompt, req.output, draw, live)

    def _meta(self, model: str, version: str) -> ModelMetadata:
        return perform(self.client, self._metadata_op(model, version))

    async def _ameta(self, model: str, version: str) -> ModelMetadata:
        return await aperform(self._aclient(), self._metadata_op(model, version))

    @public
    def generate(
        self,
        model: str,
        prompt: str | pd.DataFrame,
        /,
        *,
        version: str = "",
        display: Display = None,
        parameters: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        output: str | None = None,
        prompt_input: str | None = None,
        show_prompt: bool = False,
        concurrency: int = 4,
        progress: bool | None = None,
        **fields: Any,
    ) -> Any:
        """Generate text from ``prompt``, streamed live into the cell's output.

        In a notebook (JupyterLab, Notebook, VS Code) one output of the cell shows the text
        growing as the model sends it, then its figures; in a terminal the text is written to
        stdout as it comes. A keyword naming one of the model's inputs (``max_tokens=20``,
        ``seed=1``) becomes that input, any other one a request parameter (Triton's generate
        extension maps them the same way).

        Args:
            model: The model (decoupled / streaming; Triton LLM models and the demo ``story``).
            prompt: The prompt, or a DataFrame: then ``prompt="column"`` names its prompt
                column (default ``"prompt"``) and a copy of the frame comes back with the
                ``output`` column (default ``"completion"``) and ``<output>_error`` (the
                error of a row that failed, else None); rows run ``concurrency`` at a time
                and ``progress`` shows how far the batch got.
            version: The model version ("" = the server's choice).
            display: None / True: show it live; False: show nothing; ``"html"`` / ``"text"``
                force a form; a callable gets each drawing (a mime bundle, throttled) instead.
            parameters: Request parameters, sent as they are.
            timeout: Seconds the whole stream may take.
            output: The output holding the text (default ``text_output``, else the only text
                output of the first response).
            prompt_input: The input the prompt goes to (default ``text_input``, else the
                model's only BYTES input).
            show_prompt: Show the prompt (dimmed) before the generated text.
            concurrency: DataFrame only: rows generated at once.
            progress: DataFrame only: show the batch's progress (default: when displaying).
            **fields: The model's inputs by name, or request parameters (see above).

        Returns:
            A :class:`Generation` (``str()`` of it is the text), or for a DataFrame the frame
            with the completion and error columns (``attrs["generate"]``: the batch's figures).

        Raises:
            InvalidInputError: A bad prompt, option, or the model has no text input / output.
            InferenceError: The model failed mid-stream: the text received so far stays shown
                and is kept in the error's ``partial`` (a :class:`Generation`);
                ``context["chunks_received"]`` counts the responses before the error.
            UnsupportedError: The session cannot stream from its server (see the message).

        Example::

            reply = session.generate("story", "Alice", max_tokens=40, seed=1)
            reply.time_to_first_token, reply.tokens_per_second
            frame = session.generate("story", df, prompt="question", max_tokens=20)
        """
        if _is_frame(prompt):
            return generate_frame(
                self,
                model,
                prompt,
                version=version,
                parameters=parameters,
                timeout=timeout,
                output=output,
                prompt_input=prompt_input,
                concurrency=concurrency,
                progress=display is not False if progress is None else progress,
                fields=fields,
            )
        meta = self._meta(model, version)
        req = self._request(
            model,
            prompt,  # checked there
            meta,
            version=version,
            parameters=parameters,
            timeout=timeout,
            output=output,
            prompt_input=prompt_input,
            fields=fields,
        )
        chunks = self._stream(req)  # before the live output: an error here draws nothing
        return _drive(self._run(req, display, show_prompt), chunks)

    def _stream(self, req: _Request) -> Iterator[dict[str, Any]]:
        return _chunks(self.client, req.model, req.version, req.fields, req.parameters, req.timeout)

    async def _astream(self, req: _Request) -> AsyncIterator[dict[str, Any]]:
        return await _achunks(
            self._aclient(), req.model, req.version, req.fields, req.parameters, req.timeout
        )

    @public
    async def agenerate(
        self,
        model: str,
        prompt: str | pd.DataFrame,
        /,
        *,
        version: str = "",
        display: Display = None,
        parameters: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        output: str | None = None,
        prompt_input: str | None = None,
        show_prompt: bool = False,
        concurrency: int = 4,
        progress: bool | None = None,
        **fields: Any,
    ) -> Any:
        """The asyncio face of :meth:`generate` (same arguments, same result)."""
        if _is_frame(prompt):
            return await agenerate_frame(
                self,
                model,
                prompt,
                version=version,
                parameters=parameters,
                timeout=timeout,
                output=output,
                prompt_input=prompt_input,
                concurrency=concurrency,
                progress=display is not False if progress is None else progress,
                fields=fields,
            )
        meta = await self._ameta(model, version)
        req = self._request(
            model,
            prompt,  # checked there
            meta,
            version=version,
            parameters=parameters,
            timeout=timeout,
            output=output,
            prompt_input=prompt_input,
            fields=fields,
        )
        chunks = await self._astream(req)
        return await _adrive(self._run(req, display, show_prompt), chunks)

    def chat(
        self,
        model: str,
        *,
        system: str = "",
        version: str = "",
        template: Callable[[list[tuple[str, str]]], str] | None = None,
        display: Display = None,
        **fields: Any,
    ) -> Chat:
        """A conversation with ``model`` that keeps its history (see :class:`~nbinfer.Chat`).

        Example::

            chat = session.chat("story", max_tokens=30, seed=0)
            chat("Who ran past Alice?")      # the reply streams in; `chat` draws it all
        """
        return Chat(
            self,
            model,
            system=system,
            version=version,
            template=template,
            display=display,
            **fields,
        )


def _is_frame(value: Any) -> bool:
    """Whether ``value`` is a pandas DataFrame (pandas not imported to tell)."""
    return type(value).__module__.startswith("pandas") and hasattr(value, "columns")
