"""Write ``examples/session.har``: a browser-style HAR (1.2) around real response bodies.

The two streamed bodies are real provider bytes from public SDK test fixtures, copied in
``tests/realworld/`` with their provenance (``tests/realworld/sources.json``):

- ``openrouter-minimax-midstream-error.sse``: OpenRouter serving minimax-m2 via Minimax,
  ending in an in-band error (pydantic/pydantic-ai, test_openrouter_stream_error.yaml);
- ``custom-xai-grok-text.sse``: xAI's grok with reasoning, then "Hello" (vercel/ai,
  packages/xai/src/__fixtures__/xai-text.chunks.txt).

The HAR envelope (entries, headers, timings) is written here, as DevTools' "Save all as
HAR" lays it out; a third entry (a script the page loaded) is not an LLM exchange, so
``lab import har`` counts and skips it. Run ``python examples/make_session_har.py`` to
rebuild it; ``tests/test_examples.py`` checks the shipped file is what this writes.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REALWORLD = ROOT / "tests" / "realworld"
OUT = Path(__file__).with_name("session.har")


def _headers(pairs: dict[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in pairs.items()]


def _llm_entry(started: str, url: str, model: str, body_file: str, key: str) -> dict:
    text = (REALWORLD / body_file).read_text(encoding="utf-8")
    request = {"model": model, "stream": True, "messages": [{"role": "user", "content": "Hello"}]}
    posted = json.dumps(request, separators=(",", ":"))
    return {
        "startedDateTime": started,
        "time": 812.4,
        "request": {
            "method": "POST",
            "url": url,
            "httpVersion": "HTTP/2",
            "headers": _headers(
                {
                    "content-type": "application/json",
                    "authorization": f"Bearer {key}",
                    "accept": "text/event-stream",
                }
            ),
            "queryString": [],
            "cookies": [],
            "headersSize": -1,
            "bodySize": len(posted),
            "postData": {"mimeType": "application/json", "text": posted},
        },
        "response": {
            "status": 200,
            "statusText": "",
            "httpVersion": "HTTP/2",
            "headers": _headers(
                {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}
            ),
            "cookies": [],
            "content": {"size": len(text.encode()), "mimeType": "text/event-stream", "text": text},
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": -1,
        },
        "cache": {},
        "timings": {
            "blocked": 0.4,
            "dns": -1,
            "ssl": -1,
            "connect": -1,
            "send": 0.2,
            "wait": 301.7,
            "receive": 510.1,
        },
    }


def build() -> dict:
    script = {
        "startedDateTime": "2026-11-30T09:14:02.015Z",
        "time": 12.0,
        "request": {
            "method": "GET",
            "url": "https://chat.example.com/static/app.js",
            "httpVersion": "HTTP/2",
            "headers": [],
            "queryString": [],
            "cookies": [],
            "headersSize": -1,
            "bodySize": 0,
        },
        "response": {
            "status": 200,
            "statusText": "",
            "httpVersion": "HTTP/2",
            "headers": _headers({"content-type": "text/javascript"}),
            "cookies": [],
            "content": {
                "size": 25,
                "mimeType": "text/javascript",
                "text": "console.log('chat app');\n",
            },
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": -1,
        },
        "cache": {},
        "timings": {"send": 0.1, "wait": 10.0, "receive": 1.9},
    }
    entries = [
        script,
        _llm_entry(
            "2026-11-30T09:14:05.120Z",
            "https://openrouter.ai/api/v1/chat/completions",
            "minimax/minimax-m2:free",
            "openrouter-minimax-midstream-error.sse",
            "sk-or-v1-example-key-redacted-on-import",
        ),
        _llm_entry(
            "2026-11-30T09:14:09.877Z",
            "https://api.x.ai/v1/chat/completions",
            "grok-3-mini",
            "custom-xai-grok-text.sse",
            "xai-example-key-redacted-on-import",
        ),
    ]
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "stream-lab examples/make_session_har.py", "version": "1"},
            "pages": [],
            "entries": entries,
        }
    }


def render() -> str:
    return json.dumps(build(), indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUT}")
