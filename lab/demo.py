"""What ``lab demo`` records: every bundled fake scenario of every family, a few times each.

Kept apart from the CLI so tests and notebooks can build the same request list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lab.fakes.scenarios  # noqa: F401  (importing the fakes registers their routes)
from lab.fakes.base import FAMILIES, ROUTES

__all__ = [
    "DEMO_SWEEPS",
    "DEMO_TOOLS_MODEL",
    "DEMO_TOOLS_N",
    "FAMILY_ROUTES",
    "DemoSweep",
    "Planted",
    "demo_requests",
    "demo_sweep",
    "planted_sentences",
    "scenario_options",
    "tools_sweep",
]

DEMO_TOOLS_MODEL = "fake/tools"
"""The fake model the demo's tools sweep compares the backends of (:mod:`lab.fakes.tools`)."""
DEMO_TOOLS_N = 1
"""Repetitions of each prompt of the ``tools`` preset per backend in the demo."""

_PROMPTS = (
    "What is the capital of France?",
    "Write one sentence about streams.",
    "Plan a two-day trip to Paris.",
    "Explain SSE keepalives briefly.",
)

FAMILY_ROUTES: dict[str, tuple[str, str]] = {
    family: (ROUTES[family].provider, ROUTES[family].record_base) for family in FAMILIES
}
"""Fake-server family -> (the provider adapter that records it, its base path on the fake
server), from the fake modules' own routes (:class:`lab.fakes.base.FakeRoute`)."""

_WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather forecast for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
_IMAGE = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="


def scenario_options(model: str) -> dict[str, Any]:
    """Request options that make a scenario show its behaviour (e.g. the rejected param)."""
    if model == "fake/reject-min-p":
        return {"temperature": 0.7, "min_p": 0.05, "top_p": 0.95}
    if model == "fake/no-endpoints" or model in (
        "fake/tool-call",
        "fake/function-call",
        "fake/tool-use",
    ):
        return {"tools": [_WEATHER_TOOL]}
    if model == "fake/credit-affordability":
        return {"max_tokens": 16384}
    if model == "fake/truncated-tool-args":
        return {"tools": [_WEATHER_TOOL], "max_tokens": 32}
    if model == "fake/nvidia-problem":
        return {"temperature": 0.6, "top_k": 40}
    return {}


def _messages(model: str, prompt: str) -> list[dict[str, Any]]:
    if model in ("fake/reject-images", "fake/vllm-multimodal-500"):
        return [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture?"},
                    {"type": "image_url", "image_url": {"url": _IMAGE}},
                ],
            }
        ]
    return [{"role": "user", "content": prompt}]


def demo_requests(n: int = 3, *, families: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """``n`` requests per bundled fake scenario, deterministic.

    Each item: ``provider``, ``base_path`` (appended to the fake server's URL), ``family``
    and ``body``. Only families whose adapter is available are included.
    """
    from lab.fakes import SCENARIOS
    from lab.providers import PROVIDERS, build_body

    if n < 1:
        raise ValueError("n must be at least 1")
    items = []
    for family, scenarios in SCENARIOS.items():
        if families is not None and family not in families:
            continue
        provider, base_path = FAMILY_ROUTES[family]
        if provider not in PROVIDERS:
            continue
        for model in scenarios:
            for i in range(n):
                prompt = _PROMPTS[i % len(_PROMPTS)]
                body = build_body(  # each adapter puts the seed where its API reads it
                    provider,
                    model=model,
                    messages=_messages(model, prompt),
                    seed=i,
                    **scenario_options(model),
                )
                items.append(
                    {"provider": provider, "family": family, "base_path": base_path, "body": body}
                )
    return items


@dataclass(frozen=True)
class Planted:
    """A fault the fake server plants in one backend, and the scorecard flags that name it."""

    what: str
    flags: frozenset[str]
    hint: str = ""  # why it may go unfound at the demo's size


@dataclass(frozen=True)
class DemoSweep:
    """One sweep ``lab demo`` runs against the fake OpenRouter, and what is planted in it."""

    model: str
    out_dir: str  # under lab demo's --out
    n: int  # repetitions of each prompt per backend
    prompts: str  # a file of lab/data/, or "preset:NAME" (lab.sweep.PRESETS)
    shows: str  # what the sweep demonstrates, one line
    planted: dict[str, Planted] = field(default_factory=dict)
    reference: str | None = None
    concurrency: int = 8  # 1: the fake's draws reach each backend in plan order (same every run)
    delay_scale: float = 1.0


def _sameness_hint() -> str:
    return "a small shift needs many answers per prompt (docs/sameness.md: power at K)"


DEMO_SWEEPS: tuple[DemoSweep, ...] = (
    DemoSweep(
        model="fake/think-leak",
        out_dir="sweep",
        n=5,
        prompts="sweep_prompts.jsonl",
        shows="which backend leaks its reasoning into the answer",
        planted={
            "Chutes": Planted(
                "reasoning in <think> tags inside every answer (so its answers also differ "
                "from the others')",
                frozenset({"think_leak", "same_model"}),
            ),
            "SiliconFlow": Planted(
                "reasoning inside half of its answers (so its answers also differ from the "
                "others')",
                frozenset({"think_leak", "same_model"}),
                "10 streams cannot tell a 50 % leak rate from the rest's with confidence",
            ),
        },
        concurrency=1,
        delay_scale=0.25,
    ),
    DemoSweep(
        model=DEMO_TOOLS_MODEL,
        out_dir="sweep-tools",
        n=DEMO_TOOLS_N,
        prompts="preset:tools",
        shows="protocol markup leaks, tool-call validity and trigger agreement "
        "(lab sweep --preset tools)",
        planted={
            "Parasail": Planted(
                "gpt-oss harmony channels in the content of every answer",
                frozenset({"markup_leak", "markup_harmony"}),
            ),
            "Novita": Planted(
                "its calls written as Kimi K2 tool sections in the content, no tool_calls",
                frozenset({"markup_leak", "markup_kimi_tool_section", "trigger_agreement"}),
            ),
            "SiliconFlow": Planted(
                "its calls written as GLM <tool_call> XML in the content, no tool_calls",
                frozenset({"markup_leak", "markup_xml_tool_call", "trigger_agreement"}),
            ),
            "Together": Planted(
                "the tool schema broken on 40 % of its calls", frozenset({"tool_call_valid"})
            ),
        },
        delay_scale=0.0,
    ),
    DemoSweep(
        model="fake/model-equality",
        out_dir="sweep-same-model",
        n=5,
        prompts="sameness_prompts.jsonl",
        shows="which backend serves another model than the reference (lab sweep --reference)",
        planted={
            "Novita": Planted("a substituted model", frozenset({"same_model"})),
            "Fireworks": Planted(
                "the reference model with a small shift (flattened sampling)",
                frozenset({"same_model"}),
                _sameness_hint(),
            ),
        },
        reference="DeepInfra",
        concurrency=1,
        delay_scale=0.1,
    ),
)
"""The sweeps ``lab demo`` ends with, each against a loopback fake server."""


def _prompt_file(spec: DemoSweep) -> Path:
    from lab import sweep

    if spec.prompts.startswith("preset:"):
        return sweep.preset_prompts(spec.prompts.removeprefix("preset:"))
    return Path(__file__).parent / "data" / spec.prompts


def demo_sweep(
    spec: DemoSweep, out: Any, *, progress: bool = False, n: int | None = None
) -> tuple[Any, int, int]:
    """Run ``spec`` against a loopback fake server, recorded under ``out``. Returns the
    sweep report, the number of targets and of prompts (``lab sweep``'s summary line)."""
    from lab import sweep
    from lab.fakes import FakeServer

    prompts = sweep.load_prompts(_prompt_file(spec))
    with FakeServer(delay_scale=spec.delay_scale) as server:
        base = server.base_url + "/api/v1"
        backends = sweep.discover_backends(spec.model, base_url=base)
        targets = sweep.openrouter_targets(spec.model, backends, base_url=base)
        plan = sweep.sweep_plan("openrouter", prompts, targets, n=n or spec.n)
        report = sweep.run_sweep(
            plan,
            provider="openrouter",
            out=out,
            concurrency=spec.concurrency,
            progress=progress,
        )
    return report, len(targets), len(prompts)


def tools_sweep(
    out: Any, *, n: int = DEMO_TOOLS_N, concurrency: int = 8, progress: bool = False
) -> tuple[Any, Any]:
    """The scorecard demo, offline: the ``tools`` prompt preset ``n`` times against every
    backend of :data:`DEMO_TOOLS_MODEL` on a loopback fake server, recorded under ``out``.
    Returns the sweep report and the sweep's streams table (``lab.tables.scorecard`` of it
    flags each planted backend for its fault)."""
    from dataclasses import replace

    from lab import sweep

    spec = next(s for s in DEMO_SWEEPS if s.model == DEMO_TOOLS_MODEL)
    report, _, _ = demo_sweep(replace(spec, concurrency=concurrency), out, progress=progress, n=n)
    return report, sweep.sweep_streams(out)


def _flags(card: Any, backend: str) -> set[str]:
    rows = card.loc[card["serving_provider"] == backend, "flags"]
    return set(filter(None, str(rows.iat[0]).split(","))) if len(rows) else set()


def planted_sentences(spec: DemoSweep, card: Any) -> list[str]:
    """What the fake server planted in ``spec``'s sweep set against what the scorecard
    ``card`` flagged: the demo's findings are scripted scenarios, and it says so."""
    out = [
        f"Planted by the fake server in {spec.model} (scripted scenarios, not findings about "
        "any real provider):"
    ]
    for backend, planted in spec.planted.items():
        flagged = _flags(card, backend)
        found = sorted(planted.flags & flagged)
        missed = sorted(planted.flags - flagged)
        extra = sorted(flagged - planted.flags)
        if not missed:
            verdict = f"found (flagged: {', '.join(found)})"
        elif found:
            verdict = (
                f"found in part (flagged: {', '.join(found)}; not flagged: {', '.join(missed)}"
                + (f": {planted.hint}" if planted.hint else "")
                + ")"
            )
        else:
            verdict = "not found at this size" + (f": {planted.hint}" if planted.hint else "")
        if extra:
            verdict += f"; also flagged: {', '.join(extra)}"
        out.append(f"- {backend}: {planted.what}: {verdict}.")
    clean = [b for b in card["serving_provider"].astype(str) if b not in spec.planted]
    if clean:
        wrong = {b: sorted(_flags(card, b)) for b in clean if _flags(card, b)}
        said = (
            "flagged for nothing"
            if not wrong
            else "flagged anyway (false positives): "
            + "; ".join(f"{b} for {', '.join(v)}" for b, v in wrong.items())
        )
        out.append(f"- {', '.join(clean)}: nothing planted: {said}.")
    return out
