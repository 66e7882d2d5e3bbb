"""A conversation with a generative model: :class:`Chat` (``session.chat("model")``).

A chat keeps its history as ``(role, text)`` turns, writes the prompt of each request from it
(:func:`transcript`, or the ``template`` given: e.g. a tokenizer's chat template for a real
LLM), streams the reply through :meth:`Session.generate <nbinfer.Session.generate>`'s loop
(one live output showing the new exchange as bubbles) and draws the whole conversation as its
notebook repr. A reply that fails leaves the history as it was.

May import ``errors``, ``render`` and ``session.generate``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nbinfer.errors import InvalidInputError
from nbinfer.render.generate import chat_html, chat_text
from nbinfer.session.generate import (
    Display,
    Generation,
    StreamSource,
    _adrive,
    _drive,
    _live,
    _Request,
    _Run,
)

__all__ = ["Chat", "transcript"]

#: What a chat template takes: the turns as ``(role, text)``, oldest first.
Template = Callable[[list[tuple[str, str]]], str]


def transcript(turns: list[tuple[str, str]]) -> str:
    """The default prompt: ``Role: text`` lines and an open ``Assistant:`` line at the end."""
    lines = [f"{role.capitalize()}: {text}" for role, text in turns]
    return "\n".join([*lines, "Assistant:"])


class Chat:
    """A conversation with one model that keeps its history (``session.chat("model")``).

    Args:
        session: The session that streams the replies.
        model: The model.
        system: A first ``system`` turn (instructions), kept at the top of every prompt.
        version: The model version.
        template: Turns -> prompt (default :func:`transcript`).
        display: As :meth:`Session.generate`'s ``display``.
        **fields: Inputs / parameters sent with every message (``max_tokens=64``, ...).

    Example::

        chat = session.chat("story", max_tokens=30, seed=0)
        chat.send("Where did the Rabbit go?")   # streams; returns the Generation
        chat("And then?")                        # the same as send()
        chat.history                             # [("user", ...), ("assistant", ...), ...]
        chat                                     # the conversation as bubbles
    """

    def __init__(
        self,
        session: StreamSource,
        model: str,
        *,
        system: str = "",
        version: str = "",
        template: Template | None = None,
        display: Display = None,
        **fields: Any,
    ) -> None:
        self.session = session
        self.model = model
        self.version = version
        self.template: Template = template or transcript
        self.display = display
        self.fields = fields
        #: The turns so far, ``(role, text)``: ``system``, ``user`` and ``assistant``.
        self.history: list[tuple[str, str]] = [("system", system)] if system else []
        #: The last reply's :class:`~nbinfer.Generation` (None before the first).
        self.last: Generation | None = None

    def _start(self, text: str) -> tuple[list[tuple[str, str]], str]:
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError(
                f"chat.send(): the message must be a non-empty str, got {text!r}"
            )
        turns = [*self.history, ("user", text)]
        return turns, self.template(turns)

    def _drawer(self, text: str) -> Callable[[str, str, Mapping[str, object], str], dict[str, str]]:
        def draw(reply: str, state: str, stats: Mapping[str, object], error: str) -> dict[str, str]:
            turns = [("user", text), ("assistant", reply.strip())]
            return {
                "text/plain": chat_text(turns, model=self.model),
                "text/html": chat_html(
                    turns,
                    model=self.model,
                    streaming=state == "streaming",
                    stats=stats if state != "streaming" else None,
                    error=error,
                ),
            }

        return draw

    def _request(self, prompt: str, meta: Any, fields: Mapping[str, Any]) -> _Request:
        return self.session._request(
            self.model,
            prompt,
            meta,
            version=self.version,
            parameters=None,
            timeout=None,
            output=None,
            prompt_input=None,
            fields={**self.fields, **fields},
        )

    def _run(self, text: str, req: _Request) -> _Run:
        draw = self._drawer(text)
        live = _live(self.display, draw, f"{self.model}: ")
        return _Run(req.model, req.version, req.prompt, req.output, draw, live)

    def _keep(self, turns: list[tuple[str, str]], reply: Generation) -> Generation:
        self.history = [*turns, ("assistant", reply.text.strip())]
        self.last = reply
        return reply

    def send(self, text: str, **fields: Any) -> Generation:
        """Send a message; the reply streams in and joins the history.

        ``fields``: inputs / parameters for this message only (over the chat's own).

        Raises:
            InvalidInputError: An empty message.
            NbinferError: The request failed (the history is left as it was).
        """
        turns, prompt = self._start(text)
        req = self._request(prompt, self.session._meta(self.model, self.version), fields)
        chunks = self.session._stream(req)
        return self._keep(turns, _drive(self._run(text, req), chunks))

    __call__ = send

    async def asend(self, text: str, **fields: Any) -> Generation:
        """The asyncio face of :meth:`send`."""
        turns, prompt = self._start(text)
        req = self._request(prompt, await self.session._ameta(self.model, self.version), fields)
        chunks = await self.session._astream(req)
        return self._keep(turns, await _adrive(self._run(text, req), chunks))

    def reset(self) -> None:
        """Forget the conversation (a ``system`` turn stays)."""
        self.history = [t for t in self.history if t[0] == "system"]
        self.last = None

    def __repr__(self) -> str:
        return f"<Chat with {self.model!r}: {len(self.history)} turns>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        stats = self.last.stats() if self.last is not None else None
        return {
            "text/plain": chat_text(self.history, model=self.model) or repr(self),
            "text/html": chat_html(self.history, model=self.model, stats=stats),
        }
