"""Benchmark 3: linearity.

(a) full-stack replay: per-chunk cost of ``replay_sse("openrouter", body)`` at 200k chunks
    within 1.3x of the per-chunk cost at 20k chunks;
(b) guards: a single-content stream fed ONE CHARACTER PER DELTA through every guard in
    pipeline order (think stripper -> spill guard -> dedup -> speaker guard -> verbatim
    tool-call parser): per-character cost at 1 MB within 1.5x of that at 10 KB.

(c) tool calls: one call whose arguments arrive as 200k deltas (``openai``, chat
    completions): per-chunk cost within 1.3x of a call streamed as 20k deltas. The
    argument accumulator used to do ``acc += piece`` (quadratic: 2.21x).

(d) Gemini streamed function-call arguments: one call whose string argument arrives as
    200k ``partialArgs`` pieces (``google``, ``assemble_function_calls``), framed as SSE and
    as the streamed JSON array (no ``alt=sse``): per-piece cost within 1.3x of 20k pieces.

(e) leaked protocol markup: a chat-completions body whose content is harmony channels,
    Kimi and GLM tool blocks and special tokens, cut into deltas of 1-9 characters (markers
    split across them): per-chunk cost of the full replay within 1.3x at 200k vs 20k
    chunks, under the default (detection) and ``LabConfig.complete()`` (recovery), and of
    the markup guard alone (``MarkupGuard.feed`` per delta); and harmony with its special
    tokens stripped (``analysis…assistantanalysis…assistantfinal…``, boundaries split
    across deltas) through the guard alone, detecting and recovering.

A guard that rescans a growing buffer (quadratic) fails (b) by orders of magnitude.

    python bench/bench_linearity.py [--big 200000] [--small 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Table,
    machine_notes,
    median_time,
    openrouter_body,
    verdict,
)

REPLAY_TARGET = 1.3
GUARD_TARGET = 1.5
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def guard_text(n_chars: int, seed: int = 0) -> str:
    """Prose with paragraphs, markdown, inline code, colons in running text and the odd
    ``<`` — the characters the guards look at — but no speaker line and no tool call, so
    every guard stays engaged to the end."""
    rng = random.Random(seed)
    sentences = [
        "The café opens at 8:00 on weekdays, 9:00 at weekends.",
        "Their crème brûlée is worth the trip ☕ and the terrace is quiet.",
        "Use `pip install lab` then run the demo: it needs no network.",
        "Prices are moderate (about 4 < 5 euros) and cards are fine.",
        "**Tip** — ask for the window seat; it has the best light.",
        "A weather check helps: rain is likely after noon.",
    ]
    no_colon = [s for s in sentences if ":" not in s]  # a paragraph never opens "Label:"
    parts: list[str] = []
    size = 0
    new_paragraph = False
    while size < n_chars:
        s = rng.choice(no_colon if new_paragraph else sentences)
        new_paragraph = rng.random() < 0.15
        sep = "\n\n" if new_paragraph else " "
        parts.append(s + sep)
        size += len(s) + len(sep)
    return "".join(parts)[:n_chars]


def run_guards(text: str) -> int:
    from lab.guards import (
        RecentTextDedup,
        SpeakerBoundaryGuard,
        SpillGuard,
        ThinkBlockStripper,
        VerbatimToolCallParser,
    )

    think = ThinkBlockStripper()
    spill = SpillGuard()
    dedup = RecentTextDedup()
    speaker = SpeakerBoundaryGuard()
    verbatim = VerbatimToolCallParser(TOOLS)
    spill.observe_reasoning("The user asks about the café.")
    out = 0
    for ch in text:
        c = think.feed(ch).content
        if c:
            c = spill.filter(c).content
        if c:
            c = dedup.filter(c)
        if c:
            c = speaker.feed(c)
        if c:
            for o in verbatim.feed_all(c):
                out += len(o.text)
    tail = spill.flush().content + think.flush().content
    out += len(speaker.flush()) + len(verbatim.flush().text) + len(tail)
    return out


def tool_call_body(n: int) -> bytes:
    """A chat-completions body: one tool call whose JSON arguments arrive as ``n`` deltas
    (a 200k-delta call is a ~1 MB argument string), then the tool_calls finish."""
    head = {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {"index": 0, "id": "call_1", "type": "function",
                         "function": {"name": "write_file", "arguments": '{"text": "'}}
                    ]
                },
                "finish_reason": None,
            }
        ]
    }  # fmt: skip
    parts = [b"data: " + json.dumps(head).encode() + b"\n\n"]
    for i in range(n):
        piece = "abcdefgh"[i % 8] + " "
        d = {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}, "finish_reason": None}]}  # fmt: skip
        parts.append(b"data: " + json.dumps(d, separators=(",", ":")).encode() + b"\n\n")
    tail = {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"}'}}]}, "finish_reason": "tool_calls"}]}  # fmt: skip
    parts.append(b"data: " + json.dumps(tail).encode() + b"\n\ndata: [DONE]\n\n")
    return b"".join(parts)


def replay_tool(body: bytes) -> None:
    from lab.replay import replay_sse

    r = replay_sse("openai", body)
    assert len(r.function_calls) == 1 and r.function_calls[0].name == "write_file"


def gemini_call_chunks(n: int) -> list[dict]:
    """Gemini chunks: one function call whose ``$.text`` string arrives as ``n`` pieces."""

    def chunk(fc: dict, finish: str | None = None) -> dict:
        cand: dict = {"content": {"role": "model", "parts": [{"functionCall": fc}]}}
        if finish:
            cand["finishReason"] = finish
        return {"candidates": [cand], "modelVersion": "gemini-3-pro-preview"}

    out = [chunk({"name": "write_file", "willContinue": True})]
    for i in range(n):
        piece = {"jsonPath": "$.text", "stringValue": "abcdefgh"[i % 8] + " ", "willContinue": True}
        out.append(chunk({"partialArgs": [piece], "willContinue": True}))
    out.append(chunk({}, "STOP"))
    return out


def gemini_sse(chunks: list[dict]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)


def gemini_array(chunks: list[dict]) -> bytes:
    return ("[" + ",\r\n".join(json.dumps(c, indent=2) for c in chunks) + "]").encode()


def replay_gemini(body: bytes, n: int) -> None:
    from lab.config import LabConfig
    from lab.replay import replay_sse

    r = replay_sse("google", body, config=LabConfig(assemble_function_calls=True))
    (call,) = r.function_calls
    assert len(call.args["text"]) == 2 * n and r.finish_reason == "tool_calls"


MARKUP_UNITS = (
    "<|channel|>analysis<|message|>The user wants the weather; call the tool.<|end|>",
    "<|start|>assistant<|channel|>final<|message|>It is sunny in Oslo.<|return|>",
    "Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "Oslo"}<|tool_call_end|><|tool_calls_section_end|>',
    "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>",
    "Plain prose between the blocks, with a < b and <b>bold</b>.<|im_end|>",
)


def markup_deltas(n: int, seed: int = 0) -> list[str]:
    """``n`` content deltas of 1-9 characters cut from repeated markup units."""
    rng = random.Random(seed)
    text = "".join(MARKUP_UNITS)
    out: list[str] = []
    pos = 0
    while len(out) < n:
        k = rng.randint(1, 9)
        piece = (text * 2)[pos : pos + k]
        out.append(piece)
        pos = (pos + k) % len(text)
    return out


STRIPPED_UNIT = "We check the forecast for Oslo, then answer briefly.assistantanalysis"


def stripped_deltas(n: int, seed: int = 0) -> list[str]:
    """``n`` deltas of 1-9 characters of one stripped-harmony stream: ``analysis``, many
    analysis messages, then the final answer."""
    rng = random.Random(seed)
    text = "analysis" + STRIPPED_UNIT * (n * 5 // len(STRIPPED_UNIT) + 1)
    out: list[str] = []
    pos = 0
    while len(out) < n - 1:
        k = rng.randint(1, 9)
        out.append(text[pos : pos + k])
        pos += k
    out.append("assistantfinalSunny.")
    return out


def markup_body(n: int) -> bytes:
    """An OpenAI chat-completions body carrying :func:`markup_deltas` as content."""
    parts = []
    for piece in markup_deltas(n):
        d = {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
        parts.append(b"data: " + json.dumps(d, separators=(",", ":")).encode() + b"\n\n")
    tail = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    parts.append(b"data: " + json.dumps(tail).encode() + b"\n\ndata: [DONE]\n\n")
    return b"".join(parts)


def replay_markup(body: bytes, complete: bool) -> None:
    from lab.config import LabConfig
    from lab.replay import replay_sse

    replay_sse("openai", body, config=LabConfig.complete() if complete else None)


def run_markup_guard(deltas: list[str], recover: bool) -> int:
    from lab.guards import MarkupGuard

    guard = MarkupGuard(recover=recover)
    out = 0
    for d in deltas:
        out += len(guard.feed(d).text)
        guard.notes.clear()
    return out + len(guard.flush().text) + len(guard.detections)


def replay_n(body: bytes) -> None:
    from lab.replay import replay_sse

    replay_sse("openrouter", body)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big", type=int, default=200_000, help="chunks in the big replay body")
    ap.add_argument("--small", type=int, default=20_000, help="chunks in the small replay body")
    ap.add_argument("--big-chars", type=int, default=1_000_000)
    ap.add_argument("--small-chars", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"# linearity  ({machine_notes()})")

    small_body, big_body = openrouter_body(args.small), openrouter_body(args.big)
    # the small case is short: repeat it enough that timer noise does not dominate
    t_small = median_time(lambda: replay_n(small_body), repeat=max(5, args.repeat), warmup=1)
    t_big = median_time(lambda: replay_n(big_body), repeat=args.repeat, warmup=0)
    per_small, per_big = t_small / args.small, t_big / args.big
    r_replay = per_big / per_small

    small_text, big_text = guard_text(args.small_chars), guard_text(args.big_chars)
    assert run_guards(small_text) == len(small_text), "a guard changed the benign text"
    reps = max(1, args.big_chars // args.small_chars // 4)

    def small_many() -> None:
        for _ in range(reps):
            run_guards(small_text)

    g_small = median_time(small_many, repeat=max(5, args.repeat), warmup=1) / reps
    g_big = median_time(lambda: run_guards(big_text), repeat=args.repeat, warmup=0)
    gper_small, gper_big = g_small / len(small_text), g_big / len(big_text)
    r_guard = gper_big / gper_small

    small_tool, big_tool = tool_call_body(args.small), tool_call_body(args.big)
    k_small = median_time(lambda: replay_tool(small_tool), repeat=max(5, args.repeat), warmup=1)
    k_big = median_time(lambda: replay_tool(big_tool), repeat=args.repeat, warmup=0)
    kper_small, kper_big = k_small / args.small, k_big / args.big
    r_tool = kper_big / kper_small

    table = Table("case", "size", "median s", "per unit", "ratio big/small")
    table.add("replay_sse small", f"{args.small} chunks", t_small, f"{per_small * 1e6:.2f} us", "")
    table.add("replay_sse big", f"{args.big} chunks", t_big, f"{per_big * 1e6:.2f} us", r_replay)
    table.add("guards 1 char/delta", f"{len(small_text)} chars", g_small,
              f"{gper_small * 1e6:.2f} us", "")  # fmt: skip
    table.add("guards 1 char/delta", f"{len(big_text)} chars", g_big,
              f"{gper_big * 1e6:.2f} us", r_guard)  # fmt: skip
    table.add("tool-call argument deltas", f"{args.small} deltas", k_small,
              f"{kper_small * 1e6:.2f} us", "")  # fmt: skip
    table.add("tool-call argument deltas", f"{args.big} deltas", k_big,
              f"{kper_big * 1e6:.2f} us", r_tool)  # fmt: skip
    gemini_rows = []
    gemini_ok = True
    for framing, render in (("SSE", gemini_sse), ("JSON array", gemini_array)):
        small_g = render(gemini_call_chunks(args.small))
        big_g = render(gemini_call_chunks(args.big))
        s_g = median_time(
            lambda b=small_g: replay_gemini(b, args.small), repeat=max(5, args.repeat), warmup=1
        )
        b_g = median_time(lambda b=big_g: replay_gemini(b, args.big), repeat=args.repeat, warmup=0)
        r_g = (b_g / args.big) / (s_g / args.small)
        gemini_rows.append((framing, s_g, b_g, r_g))
        table.add(f"gemini partialArgs ({framing})", f"{args.small} pieces", s_g,
                  f"{s_g / args.small * 1e6:.2f} us", "")  # fmt: skip
        table.add(f"gemini partialArgs ({framing})", f"{args.big} pieces", b_g,
                  f"{b_g / args.big * 1e6:.2f} us", r_g)  # fmt: skip
    markup_ok = True
    markup_rows = []
    small_m, big_m = markup_body(args.small), markup_body(args.big)
    small_d, big_d = markup_deltas(args.small), markup_deltas(args.big)
    small_s, big_s = stripped_deltas(args.small), stripped_deltas(args.big)
    for label, small_run, big_run in (
        ("markup replay (default)", lambda: replay_markup(small_m, False),
         lambda: replay_markup(big_m, False)),
        ("markup replay (complete)", lambda: replay_markup(small_m, True),
         lambda: replay_markup(big_m, True)),
        ("markup guard (detect)", lambda: run_markup_guard(small_d, False),
         lambda: run_markup_guard(big_d, False)),
        ("markup guard (recover)", lambda: run_markup_guard(small_d, True),
         lambda: run_markup_guard(big_d, True)),
        ("stripped harmony (detect)", lambda: run_markup_guard(small_s, False),
         lambda: run_markup_guard(big_s, False)),
        ("stripped harmony (recover)", lambda: run_markup_guard(small_s, True),
         lambda: run_markup_guard(big_s, True)),
    ):  # fmt: skip
        s_m = median_time(small_run, repeat=max(5, args.repeat), warmup=1)
        b_m = median_time(big_run, repeat=args.repeat, warmup=0)
        r_m = (b_m / args.big) / (s_m / args.small)
        markup_rows.append((label, r_m))
        table.add(label, f"{args.small} deltas", s_m, f"{s_m / args.small * 1e6:.2f} us", "")
        table.add(label, f"{args.big} deltas", b_m, f"{b_m / args.big * 1e6:.2f} us", r_m)
    table.print()
    for label, r_m in markup_rows:
        name = "linearity_" + label.replace("(", "").replace(")", "").replace(" ", "_")
        markup_ok = (
            verdict(
                name,
                r_m <= REPLAY_TARGET,
                f"per-delta cost {args.big} vs {args.small} markup deltas ({label}) = "
                f"{r_m:.2f}x (target <= {REPLAY_TARGET}x)",
            )
            and markup_ok
        )
    for framing, _, _, r_g in gemini_rows:
        gemini_ok = (
            verdict(
                f"linearity_gemini_args_{framing.replace(' ', '_').lower()}",
                r_g <= REPLAY_TARGET,
                f"per-piece cost {args.big} vs {args.small} partialArgs pieces ({framing}) = "
                f"{r_g:.2f}x (target <= {REPLAY_TARGET}x)",
            )
            and gemini_ok
        )
    ok3 = verdict(
        "linearity_tool_call",
        r_tool <= REPLAY_TARGET,
        f"per-delta cost {args.big} vs {args.small} argument deltas = {r_tool:.2f}x "
        f"(target <= {REPLAY_TARGET}x)",
    )
    ok1 = verdict(
        "linearity_replay",
        r_replay <= REPLAY_TARGET,
        f"per-chunk cost {args.big} vs {args.small} chunks = {r_replay:.2f}x "
        f"(target <= {REPLAY_TARGET}x)",
    )
    ok2 = verdict(
        "linearity_guards",
        r_guard <= GUARD_TARGET,
        f"per-char cost {len(big_text)} vs {len(small_text)} chars = {r_guard:.2f}x "
        f"(target <= {GUARD_TARGET}x)",
    )
    return 0 if (ok1 and ok2 and ok3 and gemini_ok and markup_ok) else 1


if __name__ == "__main__":
    sys.exit(main())
