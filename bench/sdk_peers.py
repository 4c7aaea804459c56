"""The peers of the per-family benchmark: the same body read by other code, offline.

For each body of ``FAMILY_BODIES`` (bench/_common.py):

- ``httpx-sse loop``: what a careful user writes by hand with no guards at all: an
  ``httpx.Client`` over a ``MockTransport`` serving the body, ``httpx_sse.connect_sse``,
  ``json.loads`` of each event, the answer text (or the tool arguments) joined;
- the family's official SDK, where installed: ``openai`` (chat completions for the
  OpenRouter and tool-call bodies, ``responses.create`` for the Responses body),
  ``anthropic`` (``messages.create(stream=True)``, over an ``httpx2`` mock transport: the
  2.x SDK speaks httpx2) and ``google-genai`` (``generate_content_stream``). Each reads its
  raw typed events (``stream=True``, not the accumulating helpers: the SDK's cheapest
  streaming way, so a ratio against it is the least flattering one for the lab) and joins
  the same text.

Every peer returns the text it read, and the benchmark checks it against the text in the
body (``expected_text``), so a peer that skipped work cannot look fast. A peer whose package
is missing is left out (``peers`` says which are there); ``pip install -e ".[bench]"``
installs them.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from typing import Any

import httpx

API_KEY = "sk-bench-not-a-key"
"""A placeholder the SDKs insist on; no request leaves the process."""

SSE_HEADERS = {"content-type": "text/event-stream"}
BASE = "http://bench.invalid"


def _kind(name: str) -> str:
    if name.startswith("OpenRouter"):
        return "chat"
    if "tool call" in name:
        return "tool"
    if name.startswith("Responses"):
        return "responses"
    if name.startswith("Anthropic"):
        return "anthropic"
    if name.startswith("Gemini"):
        return "gemini"
    raise KeyError(name)


def _text_of_event(kind: str, obj: dict[str, Any]) -> str:
    """The answer text (tool arguments for the tool body) one parsed event carries."""
    if kind in ("chat", "tool"):
        out = []
        for choice in obj.get("choices") or ():
            delta = choice.get("delta") or {}
            if kind == "chat":
                out.append(delta.get("content") or "")
            else:
                for call in delta.get("tool_calls") or ():
                    out.append((call.get("function") or {}).get("arguments") or "")
        return "".join(out)
    if kind == "responses":
        return obj.get("delta", "") if obj.get("type") == "response.output_text.delta" else ""
    if kind == "anthropic":
        delta = obj.get("delta") or {}
        return delta.get("text", "") if delta.get("type") == "text_delta" else ""
    out = []
    for cand in obj.get("candidates") or ():
        for part in (cand.get("content") or {}).get("parts") or ():
            if not part.get("thought") and "text" in part:
                out.append(part["text"])
    return "".join(out)


def expected_text(name: str, body: bytes) -> str:
    """The text every peer must read from **body** (its data lines parsed one by one)."""
    kind = _kind(name)
    out = []
    for line in body.split(b"\n"):
        if line.startswith(b"data: ") and line[6:] != b"[DONE]":
            out.append(_text_of_event(kind, json.loads(line[6:])))
    return "".join(out)


def _mock(body: bytes, module: Any = httpx) -> Any:
    """A client of **module** (httpx or httpx2) whose every request gets **body** as SSE."""

    def handler(request: Any) -> Any:
        return module.Response(200, headers=SSE_HEADERS, content=body)

    return module.Client(transport=module.MockTransport(handler))


def httpx_sse_loop(name: str, body: bytes) -> Callable[[], str]:
    from httpx_sse import connect_sse

    kind = _kind(name)
    loads = json.loads
    text_of = _text_of_event

    def run() -> str:
        out = []
        with _mock(body) as client, connect_sse(client, "POST", BASE + "/stream") as events:
            for sse in events.iter_sse():
                if sse.data != "[DONE]":
                    out.append(text_of(kind, loads(sse.data)))
        return "".join(out)

    return run


HI = [{"role": "user", "content": "hi"}]


def _openai_chat(name: str, body: bytes) -> Callable[[], str]:
    import openai

    tool = _kind(name) == "tool"

    def run() -> str:
        with _mock(body) as http:
            client = openai.OpenAI(api_key=API_KEY, base_url=BASE + "/v1", http_client=http)
            out = []
            for chunk in client.chat.completions.create(model="m", messages=HI, stream=True):  # type: ignore[call-overload]
                for choice in chunk.choices:
                    if not tool:
                        out.append(choice.delta.content or "")
                    else:
                        for call in choice.delta.tool_calls or ():
                            out.append((call.function and call.function.arguments) or "")
            return "".join(out)

    return run


def _openai_responses(name: str, body: bytes) -> Callable[[], str]:
    import openai

    def run() -> str:
        with _mock(body) as http:
            client = openai.OpenAI(api_key=API_KEY, base_url=BASE + "/v1", http_client=http)
            out = []
            for event in client.responses.create(model="m", input="hi", stream=True):
                if event.type == "response.output_text.delta":
                    out.append(event.delta)
            return "".join(out)

    return run


def _anthropic(name: str, body: bytes) -> Callable[[], str]:
    import anthropic
    import httpx2

    def run() -> str:
        with _mock(body, httpx2) as http:
            client = anthropic.Anthropic(api_key=API_KEY, base_url=BASE, http_client=http)
            out = []
            for event in client.messages.create(model="m", max_tokens=64, messages=HI, stream=True):
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    out.append(event.delta.text)
            return "".join(out)

    return run


def _genai(name: str, body: bytes) -> Callable[[], str]:
    from google import genai

    def run() -> str:
        with _mock(body) as http:
            options = genai.types.HttpOptions(base_url=BASE, httpx_client=http)
            client = genai.Client(api_key=API_KEY, http_options=options)
            out = []
            for response in client.models.generate_content_stream(model="m", contents="hi"):
                for cand in response.candidates or ():
                    for part in (cand.content and cand.content.parts) or ():
                        if not part.thought and part.text is not None:
                            out.append(part.text)
            return "".join(out)

    return run


SDKS: dict[str, tuple[str, Callable[[str, bytes], Callable[[], str]]]] = {
    "chat": ("openai", _openai_chat),
    "tool": ("openai", _openai_chat),
    "responses": ("openai", _openai_responses),
    "anthropic": ("anthropic", _anthropic),
    "gemini": ("google.genai", _genai),
}
"""Body kind -> (the SDK's module, the reader built on it)."""

SDK_TARGETS = {"openai": 10.0, "google.genai": 10.0, "anthropic": 4.0}
"""How many times faster than the SDK the lab must be (issue 34, item 3)."""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package missing
        return False


def peers(name: str, body: bytes) -> dict[str, Callable[[], str]]:
    """Peer name -> a reader of **body** returning the text it read; missing ones left out."""
    out: dict[str, Callable[[], str]] = {}
    if _installed("httpx_sse"):
        out["httpx-sse loop"] = httpx_sse_loop(name, body)
    module, build = SDKS[_kind(name)]
    if _installed(module) and (module != "anthropic" or _installed("httpx2")):
        out[f"sdk {module}"] = build(name, body)
    return out


def sdk_target(peer: str) -> float | None:
    """The lab's required speed-up over **peer** (None: compared for information)."""
    return SDK_TARGETS.get(peer.removeprefix("sdk "))
