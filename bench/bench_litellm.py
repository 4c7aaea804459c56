"""Benchmark 2: the lab against LiteLLM's streaming normalization on the same chunks.

Both sides get the same OpenRouter-format SSE body. LiteLLM runs exactly what its HTTP
handler runs after the response arrives: ``iter_sse_lines`` -> ``OpenrouterConfig``'s
``OpenRouterChatCompletionStreamingHandler`` -> ``CustomStreamWrapper`` (chunk
normalization, reasoning_content, finish/usage handling); we read content and
reasoning_content from every ``ModelResponseStream``. The lab runs
``replay_sse("openrouter", body)`` (SSE framing, normalization, all guards, processor).
Both must produce the same visible text and reasoning; the benchmark checks it.

LiteLLM is an optional, bench-only dependency (``pip install -e .[bench]``); without it (or
if it cannot run offline) the benchmark prints SKIP and exits 0. Run with
``LITELLM_LOCAL_MODEL_COST_MAP=True`` (set here) so it never fetches its price map.

Target: lab >= 5x faster.

    python bench/bench_litellm.py [--chunks 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Table, machine_notes, openrouter_body, paired_medians, verdict  # noqa: E402

TARGET = 5.0
MODEL = "z-ai/glm-4.6"


def load_litellm():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    try:
        import litellm
        from litellm import CustomStreamWrapper
        from litellm.litellm_core_utils.litellm_logging import Logging
        from litellm.llms.custom_httpx.sse_lines import iter_sse_lines
        from litellm.llms.openrouter.chat.transformation import OpenrouterConfig
    except Exception as exc:  # ImportError, or a version without these names
        return None, f"{type(exc).__name__}: {exc}"
    litellm.suppress_debug_info = True
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)

    def run(text: str) -> tuple[int, str, str]:
        lo = Logging(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            call_type="completion",
            start_time=time.time(),
            litellm_call_id="bench",
            function_id="bench",
        )
        lo.update_environment_variables(
            model=MODEL,
            user=None,
            optional_params={},
            litellm_params={"litellm_call_id": "bench"},
            custom_llm_provider="openrouter",
        )
        it = OpenrouterConfig().get_model_response_iterator(
            streaming_response=iter_sse_lines(iter([text])), sync_stream=True, json_mode=False
        )
        wrapper = CustomStreamWrapper(
            completion_stream=it, model=MODEL, custom_llm_provider="openrouter", logging_obj=lo
        )
        content: list[str] = []
        reasoning: list[str] = []
        n = 0
        for chunk in wrapper:
            n += 1
            delta = chunk.choices[0].delta if chunk.choices else None
            if delta is None:
                continue
            if delta.content:
                content.append(delta.content)
            rc = getattr(delta, "reasoning_content", None)
            if rc:
                reasoning.append(rc)
        return n, "".join(content), "".join(reasoning)

    return run, getattr(litellm, "__version__", None) or _dist_version("litellm")


def raw_fields(body: bytes) -> tuple[str, str]:
    """The concatenated ``content`` and ``reasoning`` fields of every data payload."""
    import json

    text, reasoning = [], []
    for line in body.split(b"\n"):
        if line.startswith(b"data: {"):
            for ch in json.loads(line[6:]).get("choices") or ():
                d = ch.get("delta") or {}
                text.append(d.get("content") or "")
                reasoning.append(d.get("reasoning") or "")
    return "".join(text), "".join(reasoning)


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    try:
        return version(name)
    except Exception:
        return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"# lab vs LiteLLM  ({machine_notes()})")
    run_litellm, info = load_litellm()
    if run_litellm is None:
        verdict("vs_litellm", None, f"LiteLLM not available ({info}); pip install -e .[bench]")
        return 0
    from lab.replay import replay_sse

    body = openrouter_body(args.chunks)
    text = body.decode()
    try:
        _, l_text, l_reasoning = run_litellm(text)
    except Exception as exc:  # pragma: no cover - depends on the installed LiteLLM
        verdict("vs_litellm", None, f"LiteLLM {info} failed offline: {type(exc).__name__}: {exc}")
        return 0
    r = replay_sse("openrouter", body)
    # Both must have done the whole job: LiteLLM passes every delta through, so its output is
    # the raw concatenation; the lab's equals it too unless a guard acted (dedup drops a
    # repeat in random text now and then: those are listed).
    raw_text, raw_reasoning = raw_fields(body)
    same = (l_text, l_reasoning) == (raw_text, raw_reasoning)
    if not r.guard_events:
        same = same and (r.text, r.reasoning) == (raw_text, raw_reasoning)
    t = paired_medians(
        {"lab": lambda: replay_sse("openrouter", body), "litellm": lambda: run_litellm(text)},
        repeat=args.repeat,
        warmup=0,
    )
    n = args.chunks
    table = Table("contender", "chunks", "median s", "us/chunk", "speed vs LiteLLM")
    table.add(f"LiteLLM {info} CustomStreamWrapper", n, t["litellm"], t["litellm"] / n * 1e6, 1.0)
    table.add("lab replay_sse full stack", n, t["lab"], t["lab"] / n * 1e6, t["litellm"] / t["lab"])
    table.print()
    print(
        f"same text and reasoning: {same} (lab guard events: "
        f"{[(e.guard, e.detail.get('rule')) for e in r.guard_events]})"
    )
    speed = t["litellm"] / t["lab"]
    ok = verdict(
        "vs_litellm",
        speed >= TARGET and same,
        f"lab is {speed:.1f}x faster than LiteLLM {info} (target >= {TARGET}x)"
        + ("" if same else "; OUTPUTS DIFFER"),
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
