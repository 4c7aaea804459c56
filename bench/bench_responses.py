"""Benchmark: OpenAI Responses API replay, linear and near the chat-completions cost.

(a) per-chunk cost of ``replay_sse("openai", body, path="/responses")`` for a text stream
    at ``--big`` deltas within 1.3x of the cost at ``--small`` deltas;
(b) the same for one function call streamed as ``--big`` / ``--small`` argument deltas
    (the pieces are joined once, at the call's end);
(c) the Responses text replay per chunk against the OpenRouter chat replay of as many
    chunks, measured in the same run (the ratio, not a pass/fail target).

    python bench/bench_responses.py [--big 200000] [--small 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Table, machine_notes, median_time, openrouter_body, verdict  # noqa: E402

TARGET = 1.3


def _event(payload: dict) -> bytes:
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"event: {payload['type']}\ndata: {data}\n\n".encode()


def text_body(n: int) -> bytes:
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    parts = [
        _event({"type": "response.created", "response": {"id": "resp_1", "model": "m"}}),
        _event({"type": "response.output_item.added", "output_index": 0,
                "item": {"type": "message", "id": "msg_1"}}),
    ]  # fmt: skip
    words = ("The", " café", " opens", " at", " 8:00", " on", " weekdays.", "\n\n")
    for i in range(n):
        parts.append(
            _event({"type": "response.output_text.delta", **where, "delta": words[i % 8],
                    "sequence_number": i + 2, "obfuscation": "abcdef"})
        )  # fmt: skip
    usage = {"input_tokens": 10, "output_tokens": n, "total_tokens": n + 10}
    parts.append(_event({"type": "response.completed", "response": {"usage": usage}}))
    return b"".join(parts)


def call_body(n: int) -> bytes:
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "w"}
    parts = [_event({"type": "response.output_item.added", "output_index": 0, "item": item})]
    pieces = ['{"text": "', *(["ab "] * (n - 2)), '"}']
    for p in pieces:
        parts.append(
            _event({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
                    "output_index": 0, "delta": p})
        )  # fmt: skip
    parts.append(_event({"type": "response.output_item.done", "output_index": 0, "item": item}))
    parts.append(_event({"type": "response.completed", "response": {}}))
    return b"".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big", type=int, default=200_000)
    ap.add_argument("--small", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from lab.replay import replay_sse

    def per_chunk(body: bytes, n: int, provider: str = "openai", path: str | None = None):
        return median_time(lambda: replay_sse(provider, body, path=path), repeat=args.repeat) / n

    table = Table("case", "small µs/chunk", "big µs/chunk", "ratio", "target")
    ok = True
    for name, build in (("text deltas", text_body), ("argument deltas", call_body)):
        small = per_chunk(build(args.small), args.small, path="/responses")
        big = per_chunk(build(args.big), args.big, path="/responses")
        ratio = big / small
        ok = verdict(f"linearity, {name}", ratio <= TARGET, f"{ratio:.2f}x (<= {TARGET}x)") and ok
        table.add(name, f"{small * 1e6:.1f}", f"{big * 1e6:.1f}", f"{ratio:.2f}", f"<= {TARGET}")
    responses = per_chunk(text_body(args.small), args.small, path="/responses")
    chat = per_chunk(openrouter_body(args.small), args.small, provider="openrouter")
    table.add(
        "responses vs openrouter chat",
        f"{chat * 1e6:.1f} (chat)",
        f"{responses * 1e6:.1f}",
        f"{responses / chat:.2f}",
        "(reported)",
    )
    table.print()
    print(machine_notes())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
