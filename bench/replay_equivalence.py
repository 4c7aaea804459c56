"""Same bytes in, same results out: replay everything bundled and dump it, to compare trees.

Replays, under the default config and under ``LabConfig.complete()``:

- every body in ``tests/realworld/`` as its own provider, and again as ``openrouter`` and as
  ``custom`` (with its recorded request path, so a Responses body stays a Responses body);
- every capture in ``captures/`` (``lab.replay.replay``, and ``replay --out`` Parquet);
- every fixture under ``tests/fixtures/`` (``lab.fixtures.replay_fixture``);

and writes, per stream, the chunks, text, reasoning, thoughts, function calls, error,
guard events, facts, anomalies, finish reason, usage and serving backend, plus the tables
(``streams``, ``leaks``, ``by_backend``, ``classifiers``, ``attempts``) and the Parquet files,
as canonical JSON. Run it once per tree and compare the two dumps::

    cd /tmp/wt-base && PYTHONPATH=$PWD python $HEAD/bench/replay_equivalence.py dump /tmp/base.json
    cd $HEAD && PYTHONPATH=$PWD python bench/replay_equivalence.py dump /tmp/head.json
    python bench/replay_equivalence.py compare /tmp/base.json /tmp/head.json

``compare`` prints every key that differs and exits 1 if any does. The script uses only
public names that existed before the provider-layer refactor, so it runs on both trees.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _plain(value: Any) -> Any:
    """A JSON-ready form of results: pydantic models and dataclasses as dicts."""
    if hasattr(value, "model_dump"):
        return _plain(value.model_dump())
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(_plain(v) for v in value)
    if isinstance(value, float) and value != value:
        return "NaN"
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def _result(r: Any) -> dict[str, Any]:
    from lab.anomalies import detect

    return {
        "chunks": _plain(r.chunks),
        "text": r.text,
        "reasoning": r.reasoning,
        "thoughts": _plain(r.thoughts),
        "function_calls": _plain(r.function_calls),
        "error": _plain(r.error),
        "classifier": r.classifier,
        "serving_provider": r.serving_provider,
        "guard_events": _plain(r.guard_events),
        "finish_reason": r.finish_reason,
        "usage": _plain(r.usage),
        "outcome": r.outcome,
        "facts": _plain(r.facts),
        "anomalies": detect(r),
        "attempts": _plain(r.attempts),
    }


def _frame(df: Any, wall_clock: bool = False) -> Any:
    """A table as JSON; **wall_clock** drops the timing columns (``replay_sse`` of a bare
    body times the replay itself, which differs run to run)."""
    if wall_clock:
        df = df[[c for c in df.columns if not any(t in str(c) for t in ("ttft", "_ms"))]]
    return json.loads(df.to_json(orient="split", default_handler=str, date_format="iso"))


def _tables(results: list[Any], wall_clock: bool = False) -> dict[str, Any]:
    from lab import tables

    streams = tables.streams(results)
    return {
        "streams": _frame(streams, wall_clock),
        "leaks": _frame(tables.leaks(results), wall_clock),
        "by_backend": _frame(tables.by_backend(streams), wall_clock),
        "classifiers": _frame(tables.classifiers(streams), wall_clock),
        "attempts": _frame(tables.attempts(results), wall_clock),
    }


def _configs() -> dict[str, Any]:
    from lab.config import LabConfig

    return {"default": LabConfig(), "complete": LabConfig.complete()}


MESSAGES = [
    {"role": "system", "content": "be brief \ud800"},
    {"role": "user", "content": [{"type": "text", "text": ""}, {"type": "text", "text": "hi"}]},
    {"role": "assistant", "content": ""},
    {
        "role": "assistant",
        "content": "",
        "reasoning": "thought",
        "tool_calls": [
            {"id": "call:1/x", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "call:1/x", "content": "42"},
    {"role": "user", "content": "and?"},
]
"""Messages that exercise every per-provider message fix (surrogates, empty turns, tool-call
ids, the Mistral "Done." turn, reasoning replayed or dropped)."""


def _bodies() -> dict[str, Any]:
    """The request side: every registered provider's body for :data:`MESSAGES` and a few
    model ids (each fix is keyed by provider or by model)."""
    from lab.providers import PROVIDERS
    from lab.request import build_body

    found: dict[str, Any] = {}
    for provider in sorted(PROVIDERS):
        for model in ("gpt-4o", "claude-sonnet-4", "mistral-large", "deepseek-chat", "gemini-2"):
            key = f"body/{provider}/{model}"
            try:
                found[key] = _plain(
                    build_body(provider, model=model, messages=MESSAGES, max_tokens=64)
                )
            except Exception as exc:
                found[key] = {"raised": f"{type(exc).__name__}: {exc}"}
    return found


REQUESTS = [
    (url, headers, body)
    for url in (
        "https://openrouter.ai/api/v1/chat/completions",
        "https://open.bigmodel.cn/api/paas/v4/chat/completions",
        "http://127.0.0.1:8000/v1/chat/completions",
        "http://h/api/v1/chat/completions",
        "http://h/x/api/v1/responses",
        "http://h/v1/responses",
        "http://h/v1/messages",
        "http://h/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        "http://h/v1beta/models/a:b:generateContent",
        "http://h/relay",
        "not a url [",
    )
    for headers in ({}, {"anthropic-version": "1"}, {"X-Goog-Api-Key": "k"})
    for body in (None, b'{"contents": []}', b'{"anthropic_version": "v"}', b'{"messages": []}')
]
"""Requests that exercise every kind of evidence :func:`lab.infer.infer_family` reads."""


def _inferred() -> dict[str, Any]:
    from lab.infer import infer_family

    found: dict[str, Any] = {}
    for i, (url, headers, body) in enumerate(REQUESTS):
        guess = infer_family("POST", url, headers, body)
        found[f"infer/{i}"] = None if guess is None else [guess.family, guess.evidence]
    return found


def dump(out: Path) -> None:
    import lab
    from lab.fixtures import discover, replay_fixture
    from lab.replay import replay, replay_sse

    found: dict[str, Any] = {}
    print(f"lab from {lab.__file__}")
    realworld = ROOT / "tests" / "realworld"
    sources = json.loads((realworld / "sources.json").read_text(encoding="utf-8"))
    for cname, cfg in _configs().items():
        results = []
        for src in sorted(sources, key=lambda s: s["name"]):
            body = (realworld / src["file"]).read_bytes()
            for provider in dict.fromkeys((src["provider"], "openrouter", "custom")):
                key = f"realworld/{cname}/{provider}/{src['name']}"
                try:
                    r = replay_sse(
                        provider,
                        body,
                        config=cfg,
                        stream_id=f"{provider}:{src['name']}",
                        path=src.get("request_path"),
                    )
                except Exception as exc:  # an adapter refusing a path is a result too
                    found[key] = {"raised": f"{type(exc).__name__}: {exc}"}
                    continue
                found[key] = _result(r)
                results.append(r)
        found[f"realworld/{cname}/tables"] = _tables(results, wall_clock=True)

        for cap in sorted(p for p in (ROOT / "captures").iterdir() if p.is_dir()):
            rs = list(replay(cap, config=cfg))
            for r in rs:
                found[f"capture/{cname}/{cap.name}/{r.stream_id}"] = _result(r)
            found[f"capture/{cname}/{cap.name}/tables"] = _tables(rs)
            with tempfile.TemporaryDirectory() as tmp:
                replay(cap, config=cfg, out=tmp)
                import pandas as pd

                for f in sorted(Path(tmp).rglob("*.parquet")):
                    rel = f.relative_to(tmp).as_posix()
                    found[f"capture/{cname}/{cap.name}/out/{rel}"] = _frame(pd.read_parquet(f))

        fixture_results = []
        for fx in discover(ROOT / "tests" / "fixtures"):
            r = replay_fixture(fx, config=cfg)
            found[f"fixture/{cname}/{fx.name}"] = _result(r)
            fixture_results.append(r)
        found[f"fixture/{cname}/tables"] = _tables(fixture_results)

    found.update(_bodies())
    found.update(_inferred())
    out.write_text(json.dumps(found, sort_keys=True, indent=0, default=repr), encoding="utf-8")
    print(f"{len(found)} entries -> {out}")


def compare(a: Path, b: Path) -> int:
    left = json.loads(a.read_text(encoding="utf-8"))
    right = json.loads(b.read_text(encoding="utf-8"))
    bad = 0
    for key in sorted(set(left) | set(right)):
        if left.get(key) != right.get(key):
            bad += 1
            lv, rv = left.get(key), right.get(key)
            if isinstance(lv, dict) and isinstance(rv, dict):
                fields = [f for f in sorted(set(lv) | set(rv)) if lv.get(f) != rv.get(f)]
                print(f"DIFF {key}: {fields}")
            else:
                print(f"DIFF {key}")
    print(f"{len(set(left) | set(right))} entries compared, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "dump":
        dump(Path(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
