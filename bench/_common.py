"""Shared helpers for the benchmarks: realistic bodies, timing, the result table.

Every benchmark reports RATIOS against a baseline measured in the same run (the machine is
shared and noisy), as the median over several repetitions.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "FAMILY_BODIES",
    "Table",
    "family_body",
    "machine_notes",
    "median_time",
    "openrouter_body",
    "openrouter_chunks",
    "bracketed_ratio",
    "callgrind_instructions",
    "callgrind_window",
    "window_total",
    "counted",
    "paired_medians",
    "paired_times",
    "timed_call",
    "verdict",
]

_SYLLABLES = (
    "ca fé sta tion ope ning hou rs crè me brû lée ter ra ce wee kend pri ce mo de ra te "
    "re com men da tion an swer brief ly mor ning ☕ 8:00 9:00 — , . ; ?"
).split()


def _vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    return ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(size)]


def _words(rng: random.Random, n: int) -> list[str]:
    """Token-like deltas of one or two words (leading space kept), like a real model."""
    vocab = _vocabulary(rng)
    out = []
    for i in range(n):
        piece = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 2)))
        out.append(piece if i == 0 else " " + piece)
    return out


def openrouter_chunks(n: int, *, seed: int = 0, reasoning_share: float = 0.3) -> list[dict]:
    """``n`` OpenRouter chat.completion.chunk objects with the real envelope.

    Reasoning deltas first (``reasoning`` + ``reasoning_details``, empty content), then
    content deltas, then a finish chunk and a usage chunk (``choices: []``) — the shape
    ``lab.fakes.openrouter.ORStream`` builds, at any length.
    """
    rng = random.Random(seed)
    n_body = max(2, n - 2)
    n_reason = int(n_body * reasoning_share)
    env = {
        "id": "gen-1760053377-kSF9YGdfuHoEPWJXDm1m",
        "provider": "Fireworks",
        "model": "z-ai/glm-4.6",
        "object": "chat.completion.chunk",
        "created": 1760053377,
    }
    out: list[dict] = []
    for i, w in enumerate(_words(rng, n_body)):
        if i < n_reason:
            delta = {
                "role": "assistant",
                "content": "",
                "reasoning": w,
                "reasoning_details": [
                    {"type": "reasoning.text", "text": w, "format": "unknown", "index": 0}
                ],
            }
        else:
            if i == n_reason:
                w = w.lstrip()
            delta = {"role": "assistant", "content": w, "reasoning": None, "reasoning_details": []}
        choice = {
            "index": 0,
            "delta": delta,
            "finish_reason": None,
            "native_finish_reason": None,
            "logprobs": None,
        }
        out.append({**env, "choices": [choice]})
    fin = {"role": "assistant", "content": "", "reasoning": None, "reasoning_details": []}
    out.append(
        {
            **env,
            "choices": [
                {
                    "index": 0,
                    "delta": fin,
                    "finish_reason": "stop",
                    "native_finish_reason": "stop",
                    "logprobs": None,
                }
            ],
        }
    )
    out.append(
        {
            **env,
            "choices": [],
            "usage": {
                "prompt_tokens": 41,
                "completion_tokens": n,
                "total_tokens": 41 + n,
                "cost": 0.0001,
                "is_byok": False,
                "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": n_reason},
            },
        }
    )
    return out


def openrouter_body(n: int, *, seed: int = 0, keepalive_every: int = 50) -> bytes:
    """An OpenRouter SSE body of ``n`` data chunks: keepalive comments every
    ``keepalive_every`` chunks (and three up front), usage chunk, ``data: [DONE]``."""
    parts = [b": OPENROUTER PROCESSING\n\n"] * 3
    for i, ch in enumerate(openrouter_chunks(n, seed=seed)):
        if keepalive_every and i and i % keepalive_every == 0:
            parts.append(b": OPENROUTER PROCESSING\n\n")
        parts.append(b"data: " + json.dumps(ch, ensure_ascii=False, separators=(",", ":")).encode())
        parts.append(b"\n\n")
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def _sse(payload: dict, event: str | None = None) -> bytes:
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {data}\n\n".encode()


def chat_tool_call_body(n: int, *, seed: int = 0) -> bytes:
    """An OpenAI chat-completions body: one tool call whose arguments come in ``n - 3``
    deltas (header chunk, argument deltas, finish chunk, usage chunk), as gpt-4o streams."""
    rng = random.Random(seed)
    env = {
        "id": "chatcmpl-BdWq1hG8r6lPp9aWkOhm3sNCyXl0Q",
        "object": "chat.completion.chunk",
        "created": 1748870000,
        "model": "gpt-4o-mini-2024-07-18",
        "service_tier": "default",
        "system_fingerprint": "fp_34a54ae93c",
    }

    def chunk(delta: dict, finish: str | None = None) -> dict:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**env, "choices": [choice], "usage": None}

    head = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "index": 0,
                "id": "call_lD3yZ0b1bV7nq4fW8eXK2aUt",
                "type": "function",
                "function": {"name": "write_notes", "arguments": ""},
            }
        ],
        "refusal": None,
    }
    parts = [_sse(chunk(head))]
    words = _words(rng, max(2, n - 5))
    pieces = ['{"text": "', *(w.replace('"', "'") for w in words), '"}']
    for piece in pieces:
        parts.append(_sse(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})))
    parts.append(_sse(chunk({}, "tool_calls")))
    usage = {"prompt_tokens": 80, "completion_tokens": n, "total_tokens": 80 + n}
    parts.append(_sse({**env, "choices": [], "usage": usage}))
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def responses_text_body(n: int, *, seed: int = 0) -> bytes:
    """An OpenAI Responses API body of ``n`` output_text deltas between its created,
    item-added, item-done and completed events (the shape gpt-4.1 streams)."""
    rng = random.Random(seed)
    where = {"item_id": "msg_68a1b2c3d4e5f6", "output_index": 0, "content_index": 0}
    resp = {"id": "resp_68a1b2c3", "object": "response", "model": "gpt-4.1-nano-2025-04-14"}
    parts = [
        _sse({"type": "response.created", "sequence_number": 0,
              "response": {**resp, "status": "in_progress"}}, "response.created"),
        _sse({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
              "item": {"type": "message", "id": where["item_id"], "status": "in_progress",
                       "role": "assistant", "content": []}}, "response.output_item.added"),
    ]  # fmt: skip
    seq = 2
    for w in _words(rng, max(1, n)):
        parts.append(
            _sse({"type": "response.output_text.delta", "sequence_number": seq, **where,
                  "delta": w, "logprobs": [], "obfuscation": "kQ2xYb"},
                 "response.output_text.delta")
        )  # fmt: skip
        seq += 1
    usage = {"input_tokens": 12, "output_tokens": n, "total_tokens": n + 12,
             "input_tokens_details": {"cached_tokens": 0},
             "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
    parts.append(
        _sse({"type": "response.completed", "sequence_number": seq,
              "response": {**resp, "status": "completed", "usage": usage}},
             "response.completed")
    )  # fmt: skip
    return b"".join(parts)


def anthropic_thinking_body(n: int, *, seed: int = 0, thinking_share: float = 0.3) -> bytes:
    """An Anthropic Messages body: a thinking block (``thinking_delta`` events, then its
    signature) and a text block, ``n`` deltas in all, a ping, message_delta and stop."""
    rng = random.Random(seed)
    words = _words(rng, max(2, n))
    n_think = int(len(words) * thinking_share)
    message = {
        "model": "claude-sonnet-4-5-20250929", "id": "msg_01Y6V41gqPaKWEw7iPouH7iW",
        "type": "message", "role": "assistant", "content": [], "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 69, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": 2,
                  "service_tier": "standard"},
    }  # fmt: skip
    parts = [
        _sse({"type": "message_start", "message": message}, "message_start"),
        _sse({"type": "content_block_start", "index": 0,
              "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
             "content_block_start"),
        _sse({"type": "ping"}, "ping"),
    ]  # fmt: skip
    for w in words[:n_think]:
        parts.append(
            _sse({"type": "content_block_delta", "index": 0,
                  "delta": {"type": "thinking_delta", "thinking": w}}, "content_block_delta")
        )  # fmt: skip
    parts.append(
        _sse({"type": "content_block_delta", "index": 0,
              "delta": {"type": "signature_delta", "signature": "EvQBCkYICxgCKkAxhD4NUKFz"}},
             "content_block_delta")
    )  # fmt: skip
    parts.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    parts.append(
        _sse({"type": "content_block_start", "index": 1,
              "content_block": {"type": "text", "text": ""}}, "content_block_start")
    )  # fmt: skip
    for i, w in enumerate(words[n_think:]):
        text = w.lstrip() if i == 0 else w
        parts.append(
            _sse({"type": "content_block_delta", "index": 1,
                  "delta": {"type": "text_delta", "text": text}}, "content_block_delta")
        )  # fmt: skip
    parts.append(_sse({"type": "content_block_stop", "index": 1}, "content_block_stop"))
    parts.append(
        _sse({"type": "message_delta",
              "delta": {"stop_reason": "end_turn", "stop_sequence": None},
              "usage": {"output_tokens": n}}, "message_delta")
    )  # fmt: skip
    parts.append(_sse({"type": "message_stop"}, "message_stop"))
    return b"".join(parts)


def gemini_thoughts_body(n: int, *, seed: int = 0, thought_share: float = 0.3) -> bytes:
    """A Gemini ``streamGenerateContent?alt=sse`` body of ``n`` chunks: thought parts
    (``thought: true``) then text parts, usageMetadata on every chunk (as the API sends
    it), a thoughtSignature on the first answer part, ``STOP`` on the last chunk."""
    rng = random.Random(seed)
    words = _words(rng, max(2, n))
    n_thought = int(len(words) * thought_share)
    thoughts = answer = 0
    parts = []
    for i, w in enumerate(words):
        part: dict[str, Any] = {"text": w}
        if i < n_thought:
            part["thought"] = True
            thoughts += 1
        else:
            answer += 1
            if i == n_thought:
                part = {"text": w.lstrip(), "thoughtSignature": "CikB0e2Kb8Y3mWq1LpZx"}
        cand: dict[str, Any] = {"content": {"parts": [part], "role": "model"}}
        if i == len(words) - 1:
            cand["finishReason"] = "STOP"
        cand["index"] = 0
        usage = {
            "promptTokenCount": 9,
            "candidatesTokenCount": answer,
            "totalTokenCount": 9 + answer + thoughts,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 9}],
            "thoughtsTokenCount": thoughts,
        }
        parts.append(
            _sse({"candidates": [cand], "usageMetadata": usage,
                  "modelVersion": "gemini-2.5-flash", "responseId": "dX6LadKVC7SZ28oPr9yJoQs"})
        )  # fmt: skip
    return b"".join(parts)


FAMILY_BODIES: dict[str, tuple[str, str | None, Callable[[int], bytes]]] = {
    "OpenRouter reasoning + text": ("openrouter", None, openrouter_body),
    "one tool call, 20k argument deltas": ("openai", None, chat_tool_call_body),
    "Responses API": ("openai", "/responses", responses_text_body),
    "Anthropic thinking + text": ("anthropic", None, anthropic_thinking_body),
    "Gemini thoughts + text": ("google", None, gemini_thoughts_body),
}
"""The per-family bodies (issue 34): name -> (provider, request path, body of n chunks)."""


def family_body(name: str, n: int) -> tuple[str, str | None, bytes]:
    """(provider, path, body) of the family body **name** at about **n** data events."""
    provider, path, build = FAMILY_BODIES[name]
    return provider, path, build(n)


def median_time(fn: Callable[[], Any], *, repeat: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds (GC collected before each run; what ``fn``
    returns is freed after the clock stops: a caller keeps its results)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        times.append(timed_call(fn))
    return statistics.median(times)


def timed_call(fn: Callable[[], Any]) -> float:
    """Wall seconds of one ``fn()`` call, the collector run before it. What ``fn`` returns
    is freed only after the clock stops: freeing a replay's results (~1.2M objects for
    benchmark 5's capture, ~20 ms) is not part of replaying, and a caller keeps them."""
    gc.collect()
    t0 = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - t0
    del result
    return elapsed


def paired_times(
    fns: dict[str, Callable[[], Any]], *, repeat: int = 5, warmup: int = 1
) -> dict[str, list[float]]:
    """Wall times of each function, runs interleaved (A B C A B C ...) so that noise from
    other tenants hits every contender alike; each run is a :func:`timed_call`."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            times[name].append(timed_call(fn))
    return times


def paired_medians(
    fns: dict[str, Callable[[], Any]], *, repeat: int = 5, warmup: int = 1
) -> dict[str, float]:
    """Median wall time of each function over :func:`paired_times`' interleaved runs."""
    return {
        k: statistics.median(v) for k, v in paired_times(fns, repeat=repeat, warmup=warmup).items()
    }


def bracketed_rounds(base: list[float], other: list[float]) -> list[float]:
    """Per round, base / other, where round i's base is the mean of base runs i and i + 1
    (``base`` has one run more than ``other``): each ``other`` run is compared with the
    base runs on either side of it, which cancels a drift between them."""
    assert len(base) == len(other) + 1
    return [(base[i] + base[i + 1]) / 2 / other[i] for i in range(len(other))]


def bracketed_ratio(base: list[float], other: list[float]) -> float:
    """Median over rounds of :func:`bracketed_rounds`."""
    return statistics.median(bracketed_rounds(base, other))


def machine_notes() -> str:
    try:
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "n/a"
    return (
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, load avg {load}, "
        f"{host_costs()}"
    )


@functools.cache
def host_costs() -> str:
    """What this host charges for a page fault and a system call, measured once a process
    (~30 ms): ``"page fault 5.3 us, syscall 0.93 us"``.

    Both are the price of things the lab does and its peers do less of: every byte a replay
    keeps (its result, ~500 bytes a chunk) is fresh memory the kernel maps a page at a time,
    and the recorder's journal is written with system calls. A bare-metal Linux host takes
    ~0.1-0.3 us a fault and ~0.05-0.1 us a call; a microVM under nested virtualization (the
    host of docs/PERFORMANCE.md's later stops) 5-10 us and ~1 us, which moves wall-clock
    ratios that instruction counts (``callgrind_*.py``) do not see."""
    import mmap

    size = 8 * 1024 * 1024  # 2,048 pages, each touched once: one minor fault a page
    page = mmap.PAGESIZE
    region = mmap.mmap(-1, size)
    try:
        t0 = time.perf_counter()
        for offset in range(0, size, page):
            region[offset] = 1
        fault = (time.perf_counter() - t0) / (size // page)
        t0 = time.perf_counter()
        for offset in range(0, size, page):  # the same loop, the pages there now
            region[offset] = 2
        fault -= (time.perf_counter() - t0) / (size // page)
    finally:
        region.close()
    calls = 20_000
    getppid = os.getppid
    t0 = time.perf_counter()
    for _ in range(calls):
        getppid()
    syscall = (time.perf_counter() - t0) / calls
    return f"page fault {fault * 1e6:.1f} us, syscall {syscall * 1e6:.2f} us"


class Table:
    """A small fixed-width table printed to stdout."""

    def __init__(self, *columns: str) -> None:
        self.columns = columns
        self.rows: list[tuple[str, ...]] = []

    def add(self, *values: Any) -> None:
        self.rows.append(tuple(_fmt(v) for v in values))

    def render(self) -> str:
        widths = [
            max(len(c), *(len(r[i]) for r in self.rows)) if self.rows else len(c)
            for i, c in enumerate(self.columns)
        ]
        line = "  ".join(c.ljust(w) for c, w in zip(self.columns, widths, strict=True))
        sep = "  ".join("-" * w for w in widths)
        body = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in self.rows]
        return "\n".join([line, sep, *body])

    def print(self) -> None:
        print(self.render())
        sys.stdout.flush()


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 100:
            return f"{v:,.0f}"
        if abs(v) >= 1:
            return f"{v:.2f}"
        return f"{v:.3g}"
    return str(v)


def verdict(name: str, ok: bool | None, detail: str) -> bool:
    """Print the PASS/FAIL/SKIP line; returns ``ok`` (SKIP counts as not failed)."""
    word = "SKIP" if ok is None else ("PASS" if ok else "FAIL")
    print(f"{word}: {name}: {detail}")
    sys.stdout.flush()
    return ok is not False


COUNTED_FUNCTION = "_operator_call"
"""The C function (``operator.call``'s) inside which ``callgrind_instructions(...,
counted=True)`` counts: :func:`counted` runs the work through it. Nothing the lab or its
dependencies import calls ``operator.call`` (new in 3.11), so the work is the only caller."""


def counted(work: Callable[[], Any]) -> Any:
    """Run **work** where ``callgrind_instructions(..., counted=True)`` counts (through
    ``operator.call``: callgrind's ``--toggle-collect`` switches counting on when that C
    function is entered and off when it returns). Outside callgrind, a plain call."""
    import operator

    return operator.call(work)


def callgrind_window(script: str, *args: str) -> int:
    """Instructions of every thread between entering and leaving the work ``python script
    args...`` runs through :func:`counted`, counted by ``valgrind --tool=callgrind`` with
    ``PYTHONHASHSEED=0``: callgrind dumps its counts, and starts them again from zero, when
    :data:`COUNTED_FUNCTION` is entered (``--dump-before``) and when it returns
    (``--dump-after``), so a dump of the second kind holds that work alone.

    :func:`callgrind_instructions`' ``counted`` toggle counts only the thread that calls
    the work; this counts the threads the work hands to (Arrow's Parquet work, the capture
    reader's) as well, which a replay to result files spends. The interpreter's start and
    the set-up fall outside, as with the toggle. Several windows are summed. No window
    (a binary without the symbol, or no work run through :func:`counted`) raises."""
    import subprocess
    import tempfile

    env = {**os.environ, "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory(prefix="lab-cgwindow-") as tmp:
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/callgrind.out",
             f"--dump-before={COUNTED_FUNCTION}", f"--dump-after={COUNTED_FUNCTION}",
             os.path.realpath(sys.executable), script, *args],
            env=env,
            capture_output=True,
            text=True,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"callgrind run failed ({proc.returncode}): {proc.stderr[-600:]}")
        return window_total(Path(tmp))


def window_total(directory: Path) -> int:
    """The instructions of every window :func:`callgrind_window`'s run left in
    **directory**: the ``summary`` of each dump callgrind made on leaving
    :data:`COUNTED_FUNCTION`, summed (the dumps made on entering it, and the one at the
    end of the run, hold the rest of the process)."""
    trigger = f"desc: Trigger: --dump-after={COUNTED_FUNCTION}"
    total = windows = 0
    for path in sorted(directory.iterdir()):
        after = False
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:  # the header: the counts follow "events:"
                if line.strip() == trigger:
                    after = True
                elif line.startswith("summary:") and after:
                    total += int(line.split(":", 1)[1])
                    windows += 1
                    break
                elif line.startswith(("fl=", "fn=")):
                    break
    if not windows:
        raise RuntimeError(
            f"callgrind made no dump on leaving {COUNTED_FUNCTION}: this Python's binary has "
            "no symbol for it (stripped?) or the script ran no work through counted()"
        )
    return total


def callgrind_instructions(script: str, *args: str, counted: bool = False) -> int:
    """Instructions ``python script args...`` executes, counted by ``valgrind
    --tool=callgrind`` with ``PYTHONHASHSEED=0`` (the same hash order in every run).

    With **counted**, only the instructions of the work the script runs through
    :func:`counted` (on that thread), not the interpreter's start, the imports and the
    set-up: those move by ~0.3 % from one run to the next (7-13M instructions of ~2.9G
    here, with ASLR off too), which at 1,000 chunks was +-5-10 % of a per-chunk figure;
    the counted region repeats to within a few dozen instructions. A Python whose binary
    has no symbol for :data:`COUNTED_FUNCTION` (stripped) counts nothing: that raises,
    rather than report 0."""
    import re
    import subprocess

    env = {**os.environ, "PYTHONHASHSEED": "0"}
    toggle = [f"--toggle-collect={COUNTED_FUNCTION}"] if counted else []
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *toggle,
         os.path.realpath(sys.executable),
         script, *args],
        env=env,
        capture_output=True,
        text=True,
    )  # fmt: skip
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind run failed ({proc.returncode}): {proc.stderr[-600:]}")
    if counted and int(found.group(1)) == 0:
        raise RuntimeError(
            f"callgrind counted nothing inside {COUNTED_FUNCTION}: this Python's binary has "
            "no symbol for it (stripped?) or the script ran no work through counted()"
        )
    return int(found.group(1))
