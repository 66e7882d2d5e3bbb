"""Text generation in the notebook: ``session.generate`` / ``agenerate`` and their result.

``session.generate("story", "Alice")`` streams the model's responses and shows the text growing
in ONE output of the cell (a display updated in place in JupyterLab, Notebook and VS Code; the
text written to stdout as it comes elsewhere), and returns a :class:`Generation`: the full text
with its time to first token, tokens per second and number of chunks. A DataFrame in place of
the prompt gives a completion column (rows run concurrently, a failing row keeps its error in
the frame; :mod:`nbinfer.session.completions`). :mod:`nbinfer.session.chat` builds a
conversation on the same loop; :mod:`nbinfer.session.textgen` is the Session's face.

Where the responses come from is ONE place, :func:`_chunks` / :func:`_achunks`: the client's
``generate_stream`` (Triton's generate extension: Server-Sent Events over HTTP, the decoupled
``ModelStreamInfer`` stream over gRPC), each response a dict (``model_name``, ``model_version``,
every output by name as a JSON value, BYTES as ``str``); the rest of this module knows nothing
of the transport.

Which keyword goes where follows the generate extension: a keyword naming one of the model's
inputs (``max_tokens=20``) becomes that input, the others (``temperature=0.7`` on a model
without such an input) become request parameters; ``parameters=`` are always parameters.

May import ``client``, ``errors``, ``protocol``, ``render`` and the session's core and ops;
``session.live`` (the IPython display, imported lazily) only inside the calls that show something.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from nbinfer.client import AsyncClient, Client
from nbinfer.errors import InvalidInputError, NbinferError
from nbinfer.protocol.types import ModelMetadata
from nbinfer.render.generate import (
    generation_html,
    generation_text,
    stats_line,
)

if TYPE_CHECKING:
    from nbinfer.session.live import LiveOutput

__all__ = ["Display", "Generation", "StreamSource"]

#: The prompt input and text output of Triton's LLM models (vLLM, TensorRT-LLM, ...).
TEXT_INPUT = "text_input"
TEXT_OUTPUT = "text_output"
#: Keys of a response dict that are not outputs.
_NOT_OUTPUTS = frozenset({"model_name", "model_version", "id", "parameters"})

#: ``draw(text, state, stats, error)`` -> a mime bundle (what a live output shows).
Drawer = Callable[[str, str, Mapping[str, object], str], dict[str, str]]


@dataclasses.dataclass
class Generation:
    """One generated text and how it streamed.

    ``str(generation)`` is the text; times are seconds from the request being sent.

    Attributes:
        text: The full text (the text received so far when the stream failed).
        model: The model that wrote it; ``version``: its version ("" when the server says none).
        prompt: The prompt sent.
        chunks: Responses received (a response without text counts too).
        tokens: Responses that carried text (one token each on a streaming LLM backend).
        time_to_first_token: Until the first text arrived (None: none arrived).
        time_to_last_token: Until the last text arrived.
        duration: Until the stream ended.
        error: What ended the stream early ("" when it completed).
        responses: Every response as received (dicts, see the module docstring).
    """

    text: str
    model: str
    version: str = ""
    prompt: str = ""
    chunks: int = 0
    tokens: int = 0
    time_to_first_token: float | None = None
    time_to_last_token: float | None = None
    duration: float = 0.0
    error: str = ""
    responses: list[dict[str, Any]] = dataclasses.field(default_factory=list, repr=False)
    #: Set by a live display: true while the cell that showed it is the last one run.
    _shown_live: Callable[[], bool] | None = dataclasses.field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def tokens_per_second(self) -> float | None:
        """Tokens per second over the whole request (None when no token or no time)."""
        return self.tokens / self.duration if self.tokens and self.duration > 0 else None

    @property
    def inter_token_latency(self) -> float | None:
        """Mean seconds between two tokens after the first (None for fewer than two)."""
        if self.tokens < 2 or self.time_to_first_token is None:
            return None
        assert self.time_to_last_token is not None
        return (self.time_to_last_token - self.time_to_first_token) / (self.tokens - 1)

    def stats(self) -> dict[str, str]:
        """The figures a display shows, formatted (``{"tokens": "24", "TTFT": "3.2 ms", ...}``)."""
        out = {"tokens": str(self.tokens), "chunks": str(self.chunks)}
        if self.time_to_first_token is not None:
            out["TTFT"] = _ms(self.time_to_first_token)
        itl = self.inter_token_latency
        if itl is not None:
            out["ITL"] = _ms(itl)
        tps = self.tokens_per_second
        if tps is not None:
            out["tokens/s"] = f"{tps:.1f}"
        out["total"] = _ms(self.duration)
        return out

    def __str__(self) -> str:
        return self.text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        stats = self.stats()
        if self._shown_live is not None and self._shown_live():
            # The cell's live output above already shows the text: a summary, not a copy.
            line = f"Generation from {self.model}: {stats_line(stats)} (text shown above)"
            return {"text/plain": line}
        state = "error" if self.error else "done"
        return {
            "text/plain": generation_text(
                self.text, model=self.model, stats=stats, error=self.error
            ),
            "text/html": generation_html(
                self.text, model=self.model, state=state, stats=stats, error=self.error
            ),
        }


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.2f} s"


# -- the seam ----------------------------------------------------------------------------------


def _chunks(
    client: Client,
    model: str,
    version: str,
    fields: Mapping[str, Any],
    parameters: Mapping[str, Any],
    timeout: float | None,
) -> Iterator[dict[str, Any]]:
    """The responses of one generation, each as a dict, as they arrive.

    What precedes the request (the model's metadata) is read here; the request goes out on the
    first ``next()``, so a run's clock starts there. Closing the iterator cancels the request
    on the server.
    """
    return client.generate_stream(
        model,
        version=version or None,
        parameters=dict(parameters) or None,
        timeout=timeout,
        **fields,
    )


async def _achunks(
    client: AsyncClient,
    model: str,
    version: str,
    fields: Mapping[str, Any],
    parameters: Mapping[str, Any],
    timeout: float | None,
) -> AsyncIterator[dict[str, Any]]:
    """The asyncio twin of :func:`_chunks`."""
    return client.generate_stream(
        model,
        version=version or None,
        parameters=dict(parameters) or None,
        timeout=timeout,
        **fields,
    )


# -- one run: chunks in, text and figures out ----------------------------------------------------


class _Run:
    """Accumulates one stream's chunks into a :class:`Generation`, feeding a live output."""

    def __init__(
        self,
        model: str,
        version: str,
        prompt: str,
        output: str | None,
        draw: Drawer | None,
        live: LiveOutput | _Callback | None,
    ) -> None:
        self.model, self.version, self.prompt = model, version, prompt
        self.output = output
        self.draw = draw
        self.live = live
        self.parts: list[str] = []
        self.responses: list[dict[str, Any]] = []
        self.tokens = 0
        self.first: float | None = None
        self.last: float | None = None
        self.start = time.perf_counter()

    def add(self, chunk: dict[str, Any]) -> None:
        self.responses.append(chunk)
        piece = self._piece(chunk)
        if not piece:
            return
        now = time.perf_counter() - self.start
        if self.first is None:
            self.first = now
        self.last = now
        self.tokens += 1
        self.parts.append(piece)
        if self.live is not None:
            self.live.update(piece, self._bundle("streaming", ""))

    def _piece(self, chunk: Mapping[str, Any]) -> str:
        if self.output is None:  # the first response says which output holds the text
            texts = [k for k, v in chunk.items() if k not in _NOT_OUTPUTS and isinstance(v, str)]
            if TEXT_OUTPUT in chunk:
                self.output = TEXT_OUTPUT
            elif len(texts) == 1:
                self.output = texts[0]
            else:
                raise InvalidInputError(
                    f"model {self.model!r}: cannot tell which output holds the text (outputs: "
                    f"{', '.join(k for k in chunk if k not in _NOT_OUTPUTS) or 'none'}); "
                    f"pass output='name'",
                    model=self.model,
                )
        value = chunk.get(self.output)
        if value is None:
            return ""
        return "".join(map(str, value)) if isinstance(value, list) else str(value)

    def _bundle(self, state: str, error: str) -> Callable[[], dict[str, str]]:
        draw = self.draw
        assert draw is not None
        return lambda: draw("".join(self.parts), state, self.result(error).stats(), error)

    def result(self, error: str = "") -> Generation:
        return Generation(
            text="".join(self.parts),
            model=self.model,
            version=next((str(r["model_version"]) for r in self.responses), self.version),
            prompt=self.prompt,
            chunks=len(self.responses),
            tokens=self.tokens,
            time_to_first_token=self.first,
            time_to_last_token=self.last,
            duration=time.perf_counter() - self.start,
            error=error,
            responses=self.responses,
        )

    def finish(self, state: str, error: BaseException | None = None) -> Generation:
        """The result; the live output drawn in its final ``state``."""
        # the error's first paragraph: a model's traceback stays on the error itself
        message = "" if error is None else str(error).split("\n\n")[0] or type(error).__name__
        gen = self.result(message if state == "error" else "")
        if self.live is not None:
            footer = f"{self.model}: {stats_line(gen.stats())}"
            if message:
                footer += f"; {state}: {message}"
            self.live.finish(self._bundle(state, message), footer)
            from nbinfer.session.live import shown_in_this_cell

            gen._shown_live = shown_in_this_cell()
        return gen


def _failed(run: _Run, exc: BaseException) -> None:
    """Draw a failed run's text and error; hand the partial result to the error."""
    partial = run.finish("error", exc)
    if isinstance(exc, NbinferError):
        exc.context.setdefault("chunks_received", partial.chunks)
        exc.partial = partial  # type: ignore[attr-defined]


def _drive(run: _Run, chunks: Iterator[dict[str, Any]]) -> Generation:
    """Feed ``chunks`` to ``run``; a failure keeps the text drawn and raises."""
    run.start = time.perf_counter()  # the request goes out on the first next()
    try:
        for chunk in chunks:
            run.add(chunk)
    except KeyboardInterrupt as exc:  # the stop button: the stream is closed (cancelled)
        run.finish("stopped", exc)
        raise
    except Exception as exc:
        _failed(run, exc)
        raise
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    return run.finish("done")


async def _adrive(run: _Run, chunks: AsyncIterator[dict[str, Any]]) -> Generation:
    """The asyncio twin of :func:`_drive`."""
    run.start = time.perf_counter()
    try:
        async for chunk in chunks:
            run.add(chunk)
    except asyncio.CancelledError as exc:
        run.finish("stopped", exc)
        raise
    except Exception as exc:
        _failed(run, exc)
        raise
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()
    return run.finish("done")


def _generation_drawer(model: str, prompt: str, show_prompt: bool) -> Drawer:
    shown = prompt if show_prompt else ""

    def draw(text: str, state: str, stats: Mapping[str, object], error: str) -> dict[str, str]:
        return {
            "text/plain": generation_text(shown + text, model=model, stats=stats, error=error),
            "text/html": generation_html(
                text, model=model, state=state, stats=stats, prompt=shown, error=error
            ),
        }

    return draw


#: ``display=`` of generate / chat: auto, on / off, a form, or a callback given each bundle.
Display = bool | str | Callable[[dict[str, str]], None] | None

#: Fewest seconds between two calls of a ``display=`` callback (the last one always comes).
CALLBACK_INTERVAL = 0.05


class _Callback:
    """A live output that hands each drawing (a mime bundle) to a callback (widgets)."""

    def __init__(self, call: Callable[[dict[str, str]], None], draw: Callable[[], Any]) -> None:
        self.call = call
        self.last = time.monotonic()
        call(draw())

    def update(self, delta: str, draw: Callable[[], dict[str, str]]) -> None:
        now = time.monotonic()
        if now - self.last >= CALLBACK_INTERVAL:
            self.last = now
            self.call(draw())

    def finish(self, draw: Callable[[], dict[str, str]], footer: str) -> None:
        self.call(draw())


def _live(display: Display, draw: Drawer, head: str) -> LiveOutput | _Callback | None:
    """The live output for ``display`` (None: show nothing), first drawn empty."""
    if display is False:
        return None
    if callable(display):
        return _Callback(display, lambda: draw("", "streaming", {}, ""))
    from nbinfer.session.live import live_output

    return live_output(display, lambda: draw("", "streaming", {}, ""), head=head)


@dataclasses.dataclass
class _Request:
    """What one generation sends, after the arguments are read."""

    model: str
    version: str
    prompt: str
    fields: dict[str, Any]
    parameters: dict[str, Any]
    timeout: float | None
    output: str | None


class StreamSource(Protocol):
    """What a chat or a DataFrame batch needs of a session (``GenerateFront`` has it)."""

    def _meta(self, model: str, version: str) -> ModelMetadata: ...

    async def _ameta(self, model: str, version: str) -> ModelMetadata: ...

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
    ) -> _Request: ...

    def _stream(self, req: _Request) -> Iterator[dict[str, Any]]: ...

    async def _astream(self, req: _Request) -> AsyncIterator[dict[str, Any]]: ...


def _prompt_field(meta: ModelMetadata, model: str) -> str:
    """The input the prompt goes to: ``text_input``, else the model's only BYTES input."""
    names = [spec.name for spec in meta.inputs]
    if TEXT_INPUT in names:
        return TEXT_INPUT
    texts = [spec.name for spec in meta.inputs if spec.datatype == "BYTES"]
    if len(texts) == 1:
        return texts[0]
    raise InvalidInputError(
        f"model {model!r} has no {TEXT_INPUT!r} input and not exactly one BYTES input "
        f"(inputs: {', '.join(names) or 'none'}); pass the prompt's input as prompt_input='name'",
        model=model,
    )
