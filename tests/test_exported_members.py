"""The public surface: what DESIGN.md promises is importable under its documented name."""

from __future__ import annotations

import importlib

import lab

CONTRACT = {
    "lab.model": [
        "ThoughtLogEntry",
        "FunctionCall",
        "ProviderError",
        "RawStreamChunk",
        "ProcessedChunk",
        "GuardEvent",
        "Usage",
    ],
    "lab.guards": [
        "ThinkBlockStripper",
        "split_think_blocks",
        "SpillGuardConfig",
        "SpillGuard",
        "find_spill_seam",
        "VerbatimToolCallParser",
        "repair_truncated_json",
    ],
    "lab.degrade": [
        "Attempt",
        "build_ladder",
        "classify_degradable_error",
        "extract_rejected_params",
        "is_multimodal_rejection",
        "strip_image_blocks_with_notice",
        "DegradationPlan",
    ],
    "lab.errors": ["normalize_http_error", "classify_error"],
    "lab.replay": ["replay_sse", "replay", "StreamResult", "compare"],
    "lab.processor": ["Price", "ModelInfo", "Processor"],
    "lab.tables": ["streams", "leaks", "by_backend", "classifiers", "attempts"],
    "lab.plots": [
        "leak_rate_by_backend",
        "stream_timeline",
        "classifier_distribution",
        "ttft_by_backend",
    ],
    "lab.capture": ["open", "CaptureWriter", "Capture", "CaptureError"],
}


def test_lab_all_is_sorted_and_every_name_resolves():
    assert lab.__all__ == sorted(lab.__all__)
    assert lab.__all__
    for name in lab.__all__:
        assert getattr(lab, name) is not None


def test_every_design_contract_name_is_importable():
    for module, names in CONTRACT.items():
        mod = importlib.import_module(module)
        missing = [n for n in names if not hasattr(mod, n)]
        assert missing == [], (module, missing)


def test_every_provider_in_the_contract_has_an_adapter():
    from lab.providers import get_adapter

    for name in [
        "openrouter",
        "openai",
        "deepseek",
        "zai",
        "nvidia",
        "custom",
        "google",
        "anthropic",
    ]:
        assert get_adapter(name).provider == name


def test_stream_result_has_the_contract_fields():
    from lab.result import StreamResult

    r = StreamResult(stream_id="s", provider="openrouter")
    for field in [
        "chunks",
        "text",
        "reasoning",
        "thoughts",
        "function_calls",
        "error",
        "classifier",
        "serving_provider",
        "guard_events",
        "finish_reason",
        "usage",
        "attempts",
        "outcome",
    ]:
        assert hasattr(r, field), field


def test_unknown_attribute_of_lab_is_an_attribute_error():
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        lab.nope  # noqa: B018
