"""``fake/model-equality``: OpenRouter backends that serve different models (pure, seeded).

A fake backend that serves *a model* must answer the same prompt differently from one
request to the next, from a distribution that depends on the prompt and on the model. Here
an answer is :data:`SLOTS` word slots filled from :data:`WORDS`; which word a slot takes is
drawn from weights fixed by the prompt, the slot and the model:

- ``"reference"`` – the weights (0.55, 0.25, 0.15, 0.05) in an order picked by the prompt
  and slot;
- ``"substituted"`` – another model: the same words in another order of preference (a
  different output distribution on the same prompts);
- ``"shifted"`` – the reference with a small shift: its weights flattened (tempered to the
  power 0.8 and renormalized), as a changed sampling temperature would.

:func:`sample_answer` draws one answer (the sameness tests draw them directly); the
scenario ``fake/model-equality`` on the fake OpenRouter serves them, the model chosen by
the serving backend (:data:`BACKEND_MODELS`): DeepInfra, Together and Nebius serve the
reference, Novita a substituted model, Fireworks the reference with a small shift. The
prompt is the request's last user message; the words are drawn from the request's seed, so
each visit to a pinned backend draws a new answer and a rerun draws the same ones.
"""

from __future__ import annotations

import random
import zlib

from .base import Ctx, Script, scenario
from .openrouter import FAMILY, ORStream

__all__ = [
    "BACKEND_MODELS",
    "MODELS",
    "SLOTS",
    "WORDS",
    "or_model_equality",
    "sample_answer",
    "slot_weights",
]

WORDS = (
    ("Sure", "Certainly", "Of course", "Happy to help"),
    ("the bakery", "the shop", "the café", "the place"),
    ("opens", "starts serving", "is open", "welcomes guests"),
    ("at eight", "early", "around 8:00", "before nine"),
    ("and", "while", "but", "so"),
    ("the croissants", "the pastries", "the bread", "the coffee"),
    ("are fresh", "sell out fast", "are excellent", "come warm"),
    ("today.", "every day.", "most mornings.", "on weekdays."),
)
SLOTS = len(WORDS)
MODELS = ("reference", "substituted", "shifted")
_BASE = (0.55, 0.25, 0.15, 0.05)
_SHIFT_POWER = 0.8


def slot_weights(model: str, prompt: str, slot: int) -> list[float]:
    """The probability of each word of ``WORDS[slot]`` for ``model`` on ``prompt``."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, not {model!r}")
    salt = "substituted" if model == "substituted" else "reference"
    order = list(range(len(_BASE)))
    random.Random(zlib.crc32(f"{salt}|{prompt}|{slot}".encode())).shuffle(order)
    weights = [_BASE[order.index(i)] for i in range(len(_BASE))]
    if model == "shifted":
        weights = [w**_SHIFT_POWER for w in weights]
        total = sum(weights)
        weights = [w / total for w in weights]
    return weights


def sample_answer(model: str, prompt: str, rng: random.Random) -> str:
    """One answer of ``model`` to ``prompt``, its words drawn with ``rng``.

    >>> sample_answer("reference", "Where is the bakery?", random.Random(1))
    'Sure the café welcomes guests around 8:00 while the bread are excellent on weekdays.'
    """
    words = [
        rng.choices(WORDS[slot], weights=slot_weights(model, prompt, slot))[0]
        for slot in range(SLOTS)
    ]
    return " ".join(words)


BACKEND_MODELS = {
    "DeepInfra": "reference",
    "Together": "reference",
    "Nebius": "reference",
    "Novita": "substituted",
    "Fireworks": "shifted",
}
"""The model each backend of ``fake/model-equality`` serves."""


def _prompt(body: object) -> str:
    messages = body.get("messages") if isinstance(body, dict) else None
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else str(content)
    return ""


@scenario(
    FAMILY,
    "fake/model-equality",
    "answers sampled per prompt from the backend's model: Novita serves a substituted "
    "model, Fireworks the reference with a small shift, the others the reference",
    backends=tuple(BACKEND_MODELS),
)
def or_model_equality(ctx: Ctx) -> Script:
    model = BACKEND_MODELS.get(ctx.backend or "", "reference")
    s = ORStream(ctx)
    s.keepalives()
    # the backend in the key: two backends serving one model draw independent answers (the
    # same draws on their k-th visits would make the two samples identical, not alike)
    s.answer(sample_answer(model, _prompt(ctx.body), ctx.stream(f"answer|{ctx.backend}")))
    s.finish("stop")
    s.usage()
    s.done()
    return s.script()
