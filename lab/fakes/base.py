"""Shared building blocks for the scripted fake providers.

One definition of each wire primitive: SSE framing (``sse_data``, ``sse_event``,
``sse_comment``), compact JSON, deterministic ids, the read splitter that turns a list of SSE
events into network reads, and the scenario registry the family modules fill in.

Everything here is pure: a scenario is a function of ``(family, model, body, seed,
call_index)`` and returns a :class:`Script` (status, headers, reads, delays). The server only
plays scripts back.

"Family" here is the wire family (``StreamAdapter.family``) a fake speaks, by a short name:
``openai`` is the ``openai_compatible`` family; the others are spelled alike.
"""

from __future__ import annotations

import json
import random
import re
import string
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

FAMILIES: tuple[str, ...] = ("openrouter", "openai", "google", "anthropic")
FAMILY_ALIASES: dict[str, str] = {
    "gemini": "google",
    "openai-compatible": "openai",
    "openai_compatible": "openai",
}

# Base epoch for `created` fields: fixed so identical seeds give identical bytes.
_EPOCH = 1_760_000_000

MIN_READ_DELAY = 0.002
MAX_READ_DELAY = 0.015


def canonical_family(family: str) -> str:
    """Map a wire family's name or alias to one of :data:`FAMILIES` (ValueError otherwise)."""
    name = FAMILY_ALIASES.get(family.lower(), family.lower())
    if name not in FAMILIES:
        raise ValueError(f"unknown wire family {family!r}; expected one of {FAMILIES}")
    return name


# --------------------------------------------------------------------------- wire primitives


def dumps(obj: Any) -> str:
    """Compact JSON with raw UTF-8 (providers send non-ASCII unescaped)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def sse_data(payload: Any) -> bytes:
    """One ``data:`` event. ``payload`` is a JSON-able object or an already-rendered string."""
    text = payload if isinstance(payload, str) else dumps(payload)
    return f"data: {text}\n\n".encode()


def sse_event(name: str, payload: Any) -> bytes:
    """One named event (``event: name`` + ``data:``), Anthropic style."""
    text = payload if isinstance(payload, str) else dumps(payload)
    return f"event: {name}\ndata: {text}\n\n".encode()


def sse_comment(text: str) -> bytes:
    """One comment line (keepalive), followed by the blank line real servers send."""
    return f": {text}\n\n".encode()


def pieces(text: str, rng: random.Random, max_words: int = 2) -> list[str]:
    """Split text into token-like deltas of 1..max_words words (whitespace kept)."""
    words = re.findall(r"\s*\S+|\s+$", text)
    out: list[str] = []
    i = 0
    while i < len(words):
        n = rng.randint(1, max_words)
        out.append("".join(words[i : i + n]))
        i += n
    return out


def fragments(text: str, rng: random.Random, n: int = 4) -> list[str]:
    """Cut text at ``n - 1`` distinct random places (tool-argument fragments)."""
    cuts = sorted(rng.sample(range(1, len(text)), min(n - 1, len(text) - 1)))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


def approx_tokens_n(chars: int) -> int:
    """Rough token count for ``chars`` characters of text (never 0)."""
    return max(1, chars // 4)


# --------------------------------------------------------------------------- script + context


@dataclass(frozen=True)
class Script:
    """What the fake server sends for one request."""

    status: int
    headers: tuple[tuple[str, str], ...]
    reads: tuple[bytes, ...]
    delays: tuple[float, ...]  # seconds to wait before each read, at delay_scale=1
    backend: str | None = None  # the simulated serving backend (OpenRouter `provider`)
    reason: str | None = None  # HTTP reason phrase override (e.g. 529 "Overloaded")

    @property
    def body(self) -> bytes:
        return b"".join(self.reads)

    @property
    def streaming(self) -> bool:
        return (self.header("content-type") or "").startswith("text/event-stream")

    def header(self, name: str, default: str | None = None) -> str | None:
        low = name.lower()
        for key, value in self.headers:
            if key.lower() == low:
                return value
        return default


@dataclass
class Ctx:
    """Everything a scenario function may depend on (all deterministic)."""

    family: str
    model: str
    body: dict[str, Any]
    seed: int
    call_index: int = 0
    backends: tuple[str, ...] = ()
    headers: dict[str, str] = field(default_factory=dict)  # request headers, names lower-case
    pinned: str | None = None  # a backend of the pool the request pinned (OpenRouter routing)
    rng: random.Random = field(init=False)
    _tokens: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.rng = self.stream("main")

    def stream(self, key: str) -> random.Random:
        """An independent deterministic RNG for one purpose (order-independent draws)."""
        return random.Random(f"{key}|{self.family}|{self.model}|{self.seed}")

    def draw(self, key: str) -> float:
        return self.stream(key).random()

    @property
    def backend_index(self) -> int:
        if self.pinned is not None:
            return self.backends.index(self.pinned)
        return self.seed % len(self.backends) if self.backends else 0

    @property
    def backend(self) -> str | None:
        return self.backends[self.backend_index] if self.backends else None

    def backend_misbehaves(self, rates: dict[str, float]) -> bool:
        """True when this request's backend shows the fault.

        ``rates`` maps backend -> fault rate. The k-th visit to a backend (k = seed // pool
        size) faults when frac(k * golden ratio) < rate: the first visit always faults, and
        over many visits the fraction converges to the rate (a low-discrepancy sequence, so
        even a handful of recordings shows the rate roughly). A pinned request's seed counts
        the visits to its backend itself (k = seed).
        """
        rate = rates.get(self.backend or "", 0.0)
        visit = self.seed if self.pinned is not None else self.seed // max(1, len(self.backends))
        return rate > 0.0 and (visit * 0.6180339887498949) % 1.0 < rate

    @property
    def created(self) -> int:
        return _EPOCH + (zlib.crc32(self.model.encode()) % 100_000) + self.seed * 61

    def token(self, n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
        """A random-looking id; successive calls differ, the sequence is deterministic."""
        self._tokens += 1
        rng = self.stream(f"token{self._tokens}")
        return "".join(rng.choice(alphabet) for _ in range(n))

    def uuid(self) -> str:
        h = self.token(32, "0123456789abcdef")
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"

    @property
    def prompt_chars(self) -> int:
        return len(dumps(self.body.get("messages") or self.body.get("contents") or ""))

    @property
    def prompt_tokens(self) -> int:
        return 24 + self.prompt_chars // 4 + self.stream("prompt").randint(0, 40)

    @property
    def credential(self) -> str:
        """The API key the request sent (``Authorization: Bearer``, ``x-api-key``,
        ``x-goog-api-key``), for scenarios that echo it the way careless providers do."""
        auth = self.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        return self.headers.get("x-api-key") or self.headers.get("x-goog-api-key") or "(none)"

    def messages_have_images(self) -> bool:
        for msg in self.body.get("messages") or []:
            content = msg.get("content") if isinstance(msg, dict) else None
            if isinstance(content, list) and any(
                isinstance(p, dict) and p.get("type") in ("image_url", "image") for p in content
            ):
                return True
        return False


def split_reads(events: Sequence[bytes], rng: random.Random) -> list[bytes]:
    """Turn SSE events into network reads, deterministically from ``rng``.

    Some reads hold several events, some events are cut across reads, and the first
    multi-byte UTF-8 character in the stream (if any) is always split between two reads.
    """
    buf = b"".join(events)
    cuts: set[int] = set()
    pos = 0
    for ev in events:
        if len(ev) > 16 and rng.random() < 0.3:  # split inside this event
            cuts.add(pos + rng.randrange(1, len(ev)))
        pos += len(ev)
        if rng.random() < 0.65:  # otherwise merged with the next event
            cuts.add(pos)
    for i, byte in enumerate(buf):
        if byte >= 0xC0:  # lead byte of a multi-byte UTF-8 sequence
            cuts.add(i + 1)
            break
    edges = [0, *sorted(c for c in cuts if 0 < c < len(buf)), len(buf)]
    return [buf[a:b] for a, b in zip(edges, edges[1:], strict=False) if b > a]


def split_inside(reads: Sequence[bytes], needle: bytes) -> tuple[bytes, ...]:
    """``reads`` with a boundary inside every occurrence of ``needle`` (a third of the way
    in), so a consumer sees it split across two reads."""
    buf = b"".join(reads)
    edges, pos = [], 0
    for read in reads:
        pos += len(read)
        edges.append(pos)
    at = buf.find(needle)
    while at >= 0 and len(needle) > 1:
        edges.append(at + max(1, len(needle) // 3))
        at = buf.find(needle, at + 1)
    cuts = [0, *sorted(set(edges))]
    return tuple(buf[a:b] for a, b in zip(cuts, cuts[1:], strict=False) if b > a)


def make_script(
    ctx: Ctx,
    events: Sequence[bytes],
    headers: Sequence[tuple[str, str]],
    *,
    status: int = 200,
) -> Script:
    """A streaming script: events split into reads with 2–15 ms delays each."""
    reads = split_reads(events, ctx.stream("reads"))
    delay_rng = ctx.stream("delays")
    delays = tuple(delay_rng.uniform(MIN_READ_DELAY, MAX_READ_DELAY) for _ in reads)
    return Script(status, tuple(headers), tuple(reads), delays, backend=ctx.backend)


def json_script(
    ctx: Ctx,
    status: int,
    payload: Any,
    headers: Sequence[tuple[str, str]],
    *,
    content_type: str = "application/json",
    reason: str | None = None,
) -> Script:
    """A non-streaming JSON response (pre-stream HTTP errors)."""
    body = dumps(payload).encode()
    hdrs = (("Content-Type", content_type), *headers)
    delay = ctx.stream("delays").uniform(MIN_READ_DELAY, MAX_READ_DELAY)
    return Script(status, hdrs, (body,), (delay,), backend=ctx.backend, reason=reason)


# --------------------------------------------------------------------------- registry

ScenarioFn = Callable[[Ctx], Script]


@dataclass(frozen=True)
class FakeRoute:
    """Where a fake family listens and how the lab and SDKs reach it: the one place a fake
    module declares its route (:func:`register_route`), which the server's routing, its
    ``family_base_url``, ``lab fake-server``'s listing and :mod:`lab.demo` all read.

    - **match**: a request path (no query) -> ``(matches, model id from the path or None)``;
      routes are tried by ``priority``, highest first (an exact path before a suffix);
    - **provider**: the :mod:`lab.providers` adapter that records the family;
    - **record_base**: the base path that adapter is given (its endpoint appends the rest);
    - **sdk_base**: the base path the family's own SDK expects (``""`` for Anthropic's,
      which appends ``/v1/messages`` itself);
    - **listing**: the route as ``lab fake-server`` prints it.
    """

    family: str
    provider: str
    record_base: str
    sdk_base: str
    listing: str
    match: Callable[[str], tuple[bool, str | None]]
    priority: int = 0


ROUTES: dict[str, FakeRoute] = {}


def register_route(route: FakeRoute) -> FakeRoute:
    """Declare a fake family's route (one call in its module, beside its scenarios)."""
    ROUTES[route.family] = route
    return route


def suffix_route(suffix: str) -> Callable[[str], tuple[bool, str | None]]:
    """A ``match`` for the paths that end with ``suffix`` (no model in the path)."""
    return lambda path: (path.endswith(suffix), None)


@dataclass(frozen=True)
class Scenario:
    family: str
    model: str
    description: str
    fn: ScenarioFn
    backends: tuple[str, ...] = ()


REGISTRY: dict[str, dict[str, Scenario]] = {f: {} for f in FAMILIES}
UNKNOWN_MODEL: dict[str, ScenarioFn] = {}


def scenario(
    family: str, model: str, description: str, *, backends: Sequence[str] = ()
) -> Callable[[ScenarioFn], ScenarioFn]:
    """Register a scenario function under ``(family, model id)``."""

    def register(fn: ScenarioFn) -> ScenarioFn:
        REGISTRY[family][model] = Scenario(family, model, description, fn, tuple(backends))
        return fn

    return register


def unknown_model(family: str) -> Callable[[ScenarioFn], ScenarioFn]:
    """Register the family's real "unknown model" error response."""

    def register(fn: ScenarioFn) -> ScenarioFn:
        UNKNOWN_MODEL[family] = fn
        return fn

    return register
