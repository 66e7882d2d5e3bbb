"""``story``: a tiny generative demo model (decoupled, one word per response, no network).

A word-level bigram model (a word given the one before it; unigram counts after a word with no
successor) counted by
``scripts/train_demo_models.py`` over the first paragraphs of *Alice's Adventures in
Wonderland* (public domain, ``scripts/data/alice_ch1.txt``); the counts ship in
``weights/story.npz`` (a few KB). It takes its inputs as Triton's LLM models (vLLM,
TensorRT-LLM) do, so the same notebook code drives it and a real LLM:

* ``text_input`` BYTES ``[1]``: the prompt; its last known word is the context.
* ``max_tokens`` INT32 ``[1]`` (optional, default 32, at most 512): words to generate.
* ``temperature`` FP32 ``[1]`` (optional, default 1.0): 0 picks the likeliest word.
* ``seed`` INT64 ``[1]`` (optional): the same seed, prompt and options give the same text;
  none draws a fresh one.
* ``stream`` BOOL ``[1]`` (optional, default true): false sends one response with the text.

Each may instead be a request parameter of the same name (an input wins). ``token_delay_ms``
(parameter, default :attr:`Story.token_delay_ms`) paces the words like a real model's decode
steps, so streaming is visible. Output: ``text_output`` BYTES ``[1]``, one word per response
(with its leading space), all of them when ``stream`` is false. The model stops early when its
client gives up (``context.cancelled``).

Layer: server (demo); imports numpy, errors, server.model and the demo weights' location.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from nbinfer.errors import InvalidInputError
from nbinfer.server.demo.nets import WEIGHTS_DIR
from nbinfer.server.model import InferContext, Model, TensorDef

__all__ = ["PARAGRAPH", "Story", "StoryWeights", "generate_words", "load_story"]

#: The token that stands for a paragraph break (it also starts the corpus).
PARAGRAPH = "\n\n"
#: Most words one request may ask for.
MAX_TOKENS = 512


class StoryWeights:
    """The counts of ``weights/story.npz`` as look-up tables.

    Attributes:
        vocab: The words, by id.
        unigram: Count of each word.
        bigram: ``{previous id: (next ids, counts)}``.
    """

    def __init__(self, arrays: Mapping[str, np.ndarray[Any, Any]]) -> None:
        self.vocab: list[str] = [str(w) for w in arrays["vocab"]]
        self.index = {w: i for i, w in enumerate(self.vocab)}
        self.lower: dict[str, int] = {}
        for i, w in enumerate(self.vocab):
            self.lower.setdefault(w.lower(), i)
        self.unigram = arrays["unigram"].astype(np.float64)
        self.bigram = _table(arrays["bigram"])

    def ids(self, text: str) -> list[int]:
        """The known words of ``text`` as ids (unknown words are skipped)."""
        out = []
        for word in text.split():
            i = self.index.get(word, self.lower.get(word.lower()))
            if i is not None:
                out.append(i)
        return out


def _table(rows: np.ndarray[Any, Any]) -> dict[int, tuple[np.ndarray[Any, Any], Any]]:
    """``{previous: (next ids, counts)}`` from rows ``(previous, next, count)``."""
    table: dict[int, tuple[list[int], list[float]]] = {}
    for prev, word, count in rows.tolist():
        nxt, cnt = table.setdefault(prev, ([], []))
        nxt.append(word)
        cnt.append(float(count))
    return {k: (np.array(n), np.array(c)) for k, (n, c) in table.items()}


def load_story() -> StoryWeights:
    """Read the shipped counts of the ``story`` model."""
    with np.load(WEIGHTS_DIR / "story.npz", allow_pickle=False) as npz:
        return StoryWeights({key: npz[key] for key in npz.files})


def generate_words(
    weights: StoryWeights,
    prompt: str,
    *,
    max_tokens: int,
    temperature: float = 1.0,
    seed: int | None = None,
) -> Iterator[str]:
    """The words that follow ``prompt``, one at a time, each as it is printed.

    Deterministic for a given ``seed`` (numpy's PCG64); ``temperature`` 0 is greedy.
    """
    rng = np.random.default_rng(seed)
    context = [weights.index[PARAGRAPH], *weights.ids(prompt)]
    previous = PARAGRAPH if len(context) == 1 else weights.vocab[context[-1]]
    for _ in range(max_tokens):
        if context[-1] in weights.bigram:
            nxt, counts = weights.bigram[context[-1]]
        else:
            nxt, counts = np.arange(len(weights.vocab)), weights.unigram
        if temperature <= 0:
            choice = int(nxt[int(np.argmax(counts))])
        else:
            p = np.power(counts, 1.0 / temperature)
            choice = int(nxt[int(rng.choice(len(nxt), p=p / p.sum()))])
        word = weights.vocab[choice]
        if word == PARAGRAPH:
            yield PARAGRAPH
        else:
            yield word if previous == PARAGRAPH else " " + word
        previous = word
        context.append(choice)


class Story(Model):
    """Decoupled demo text generator: one word per response (see the module docstring)."""

    name = "story"
    inputs = (
        TensorDef("text_input", "BYTES", [1]),
        TensorDef("max_tokens", "INT32", [1], optional=True),
        TensorDef("temperature", "FP32", [1], optional=True),
        TensorDef("seed", "INT64", [1], optional=True),
        TensorDef("stream", "BOOL", [1], optional=True),
    )
    outputs = (TensorDef("text_output", "BYTES", [1]),)
    device = "cpu"
    decoupled = True
    #: Pause before each word, in milliseconds (parameter ``token_delay_ms`` overrides it).
    token_delay_ms = 20.0
    _weights: StoryWeights | None = None

    def load(self) -> None:
        """Read the shipped counts."""
        self._weights = load_story()

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Iterator[dict[str, Any]]:
        """Yield one response per generated word (or one with them all: ``stream`` false)."""
        assert self._weights is not None
        params = context.parameters
        prompt = _scalar(inputs, params, "text_input", b"")
        text = prompt.decode("utf-8", "replace") if isinstance(prompt, bytes) else str(prompt)
        max_tokens = int(_scalar(inputs, params, "max_tokens", 32))
        if not 0 <= max_tokens <= MAX_TOKENS:
            raise InvalidInputError(f"max_tokens must be in 0..{MAX_TOKENS}, got {max_tokens}")
        temperature = float(_scalar(inputs, params, "temperature", 1.0))
        if not 0 <= temperature <= 100:
            raise InvalidInputError(f"temperature must be in 0..100, got {temperature}")
        seed_value = _scalar(inputs, params, "seed", None)
        seed = None if seed_value is None else int(seed_value)
        stream = _scalar(inputs, params, "stream", True)
        stream = stream.lower() not in ("false", "0") if isinstance(stream, str) else bool(stream)
        delay = float(params.get("token_delay_ms", self.token_delay_ms)) / 1000.0
        words = generate_words(
            self._weights, text, max_tokens=max_tokens, temperature=temperature, seed=seed
        )
        if not stream:
            yield {"text_output": _bytes("".join(words))}
            return
        for word in words:
            if delay > 0:
                time.sleep(delay)
            if context.cancelled:  # the client gave up: stop decoding
                return
            yield {"text_output": _bytes(word)}


def _scalar(inputs: Mapping[str, Any], params: Mapping[str, Any], name: str, default: Any) -> Any:
    """The one value of input ``name``, else parameter ``name``, else ``default``."""
    if name in inputs:
        arr = np.asarray(inputs[name]).reshape(-1)
        if arr.size != 1:
            raise InvalidInputError(f"input {name!r} must hold one value, got {arr.size}")
        return arr[0].item() if arr.dtype != object else arr[0]
    return params.get(name, default)


def _bytes(text: str) -> np.ndarray[Any, Any]:
    return np.array([text.encode("utf-8")], dtype=object)
