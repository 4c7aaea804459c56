"""The parameter-degradation ladder (docs/reference.md, "6. Parameter degradation"): static
rungs, classification, targeted retries, image stripping and the per-request plan."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.degrade import (
    IMAGE_STRIP_NOTICE_ONE,
    MAX_TARGETED_DEGRADATION_ATTEMPTS,
    PARAM_DROP_PRIORITY,
    REJECTABLE_PARAM_TOKENS,
    Attempt,
    DegradationPlan,
    FailureRecord,
    build_image_strip_attempt,
    build_ladder,
    build_targeted_attempt,
    classify_degradable_error,
    count_image_blocks,
    custom_should_retry_without_stop,
    describe_degradation_trigger,
    error_message_names_rejectable_param,
    extract_rejected_params,
    image_strip_notice,
    is_generic_error_message,
    is_multimodal_rejection,
    messages_contain_image_blocks,
    serialize_body,
    stop_rejection,
    stream_options_rejection,
    strip_image_blocks_with_notice,
)

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
NOTICE_TWO = (
    "[System: 2 attached images were removed because this endpoint rejected image input. "
    "Do not guess or claim to see the image contents.]"
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def openrouter_body() -> dict:
    """A realistic OpenRouter body in the adapter's key order."""
    return {
        "model": "z-ai/glm-4.6",
        "messages": [
            {"role": "system", "content": "You are Tomori."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "what is in this picture?"}, IMAGE],
            },
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.7,
        "tools": TOOLS,
        "top_p": 0.95,
        "min_p": 0.05,
        "logit_bias": {"50256": -100},
    }


def labels(attempts: list[Attempt]) -> list[str]:
    return [a.label for a in attempts]


# --------------------------------------------------------------------------- constants


def test_rejectable_params_are_the_probe_order_plus_stream_options():
    assert PARAM_DROP_PRIORITY == (
        "top_p",
        "top_k",
        "min_p",
        "frequency_penalty",
        "presence_penalty",
        "repetition_penalty",
        "logit_bias",
        "temperature",
        "max_tokens",
        "stop",
    )
    assert REJECTABLE_PARAM_TOKENS == (*PARAM_DROP_PRIORITY, "stream_options")
    assert MAX_TARGETED_DEGRADATION_ATTEMPTS == 3


# --------------------------------------------------------------------------- the ladder


def test_ladder_for_realistic_openrouter_body_has_exact_label_sequence():
    ladder = build_ladder(openrouter_body())
    assert labels(ladder) == [
        "default",
        "no_stream_options",
        "probe_drop_top_p",
        "probe_drop_min_p",
        "probe_drop_logit_bias",
        "probe_drop_temperature",
        "strip_images",
        "probe_drop_tools",
        "minimal_payload",
    ]


def test_ladder_rung_bodies_follow_the_reference_shapes():
    body = openrouter_body()
    ladder = {a.label: a.body for a in build_ladder(body)}
    assert ladder["default"] == body
    baseline = {k: v for k, v in body.items() if k != "stream_options"}
    assert ladder["no_stream_options"] == baseline
    assert ladder["probe_drop_min_p"] == {k: v for k, v in baseline.items() if k != "min_p"}
    assert ladder["strip_images"]["messages"][1]["content"] == [
        {"type": "text", "text": "what is in this picture?"},
        {"type": "text", "text": IMAGE_STRIP_NOTICE_ONE},
    ]
    assert ladder["strip_images"]["tools"] == TOOLS
    assert ladder["probe_drop_tools"] == {k: v for k, v in baseline.items() if k != "tools"}
    # minimal payload: mandatory keys only, messages image-stripped
    assert list(ladder["minimal_payload"]) == ["model", "messages", "stream"]
    assert ladder["minimal_payload"]["messages"] == ladder["strip_images"]["messages"]


def test_ladder_probes_adapter_priority_keys_first_and_unknown_keys_last_in_insertion_order():
    body = {
        "model": "meta/llama-3.1-70b-instruct",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "seed": 7,
        "reasoning_budget": 512,
        "max_tokens": 1024,
        "chat_template_kwargs": {"enable_thinking": False},
        "top_k": 40,
    }
    ladder = build_ladder(body, priority_keys=("reasoning_budget",))
    assert labels(ladder) == [
        "default",
        "probe_drop_reasoning_budget",
        "probe_drop_top_k",
        "probe_drop_max_tokens",
        "probe_drop_seed",
        "probe_drop_chat_template_kwargs",
        "minimal_payload",
    ]


def test_ladder_never_probes_mandatory_keys():
    body = {
        "model": "deepseek-reasoner",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "thinking": {"type": "enabled"},
        "temperature": 0.3,
        "top_p": 0.9,
    }
    ladder = build_ladder(body, mandatory_keys=("model", "messages", "stream", "thinking"))
    assert labels(ladder) == [
        "default",
        "probe_drop_top_p",
        "probe_drop_temperature",
        "minimal_payload",
    ]
    assert all(a.body["thinking"] == {"type": "enabled"} for a in ladder)
    assert list(ladder[-1].body) == ["model", "messages", "stream", "thinking"]


def test_ladder_dedups_identical_bodies_keeping_the_first_label():
    # no stream_options, no images, no optional keys: every rung equals the default
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    assert labels(build_ladder(body)) == ["default"]


def test_ladder_without_image_stripping_has_no_strip_rung_and_keeps_images_in_minimal():
    body = openrouter_body()
    ladder = build_ladder(body, strip_images=False)
    assert "strip_images" not in labels(ladder)
    assert ladder[-1].label == "minimal_payload"
    assert ladder[-1].body["messages"] == body["messages"]


def test_ladder_accepts_a_custom_stripper():
    def drop_all_images(messages):
        return [
            {**m, "content": "[image]"} if isinstance(m["content"], list) else m for m in messages
        ]

    ladder = {
        a.label: a.body for a in build_ladder(openrouter_body(), strip_images=drop_all_images)
    }
    assert ladder["strip_images"]["messages"][1]["content"] == "[image]"


def test_ladder_never_mutates_the_input_and_rungs_do_not_share_state_with_it():
    body = openrouter_body()
    before = copy.deepcopy(body)
    ladder = build_ladder(body)
    assert body == before
    ladder[0].body["messages"][0]["content"] = "changed"
    ladder[0].body["logit_bias"]["1"] = 5
    assert body == before


def test_serialize_body_is_key_order_sensitive_like_json_stringify():
    assert serialize_body({"a": 1, "b": [1, "é"]}) == '{"a":1,"b":[1,"é"]}'
    assert serialize_body({"b": 1, "a": 1}) != serialize_body({"a": 1, "b": 1})


# --------------------------------------------------------------------------- classification


@pytest.mark.parametrize(
    ("status", "message", "kwargs", "expected"),
    [
        (400, "", {}, "generic_400"),
        (400, "  Bad Request. ", {}, "generic_400"),
        (400, "ERROR!", {}, "generic_400"),
        (400, "Internal error.", {}, "generic_400"),
        (
            400,
            "Unsupported parameter: 'max_tokens' is not supported with this model.",
            {},
            "parameter_rejection_400",
        ),
        (400, "Invalid API parameter: top_k", {}, "parameter_rejection_400"),
        (400, "Some parameters are not yet supported: min_p", {}, "parameter_rejection_400"),
        (422, "Unsupported parameter: top_k", {}, None),
        (
            404,
            "No endpoints found that support tool use. To learn more about provider routing, visit: https://openrouter.ai/docs/provider-routing",
            {},
            "no_endpoints_404",
        ),
        (404, "No allowed providers are available for the selected model.", {}, None),
        (502, "Provider returned error", {}, None),
        (502, "Provider returned error", {"degrade_on_502": True}, "backend_incompatible_502"),
        (500, "Internal Server Error", {}, None),
        (500, "Internal Server Error", {"degrade_on_opaque_5xx": True}, "opaque_5xx"),
        (503, "", {"degrade_on_opaque_5xx": True}, "opaque_5xx"),
        (
            500,
            "The NVIDIA backend crashed: CUDA out of memory",
            {"degrade_on_opaque_5xx": True},
            None,
        ),
        (None, "", {"degrade_on_opaque_5xx": True}, None),
        (401, "No auth credentials found", {"degrade_on_502": True}, None),
    ],
)
def test_classify_degradable_error_table(status, message, kwargs, expected):
    assert classify_degradable_error(status, message, **kwargs) == expected


def test_generic_message_ignores_case_trailing_punctuation_and_whitespace():
    assert is_generic_error_message(" Request failed!. \n")
    assert is_generic_error_message(None)
    assert not is_generic_error_message("bad request: top_k")


def test_stream_options_rejection_needs_the_key_in_the_failing_body_and_400_or_422():
    body = {"model": "m", "stream_options": {"include_usage": True}}
    msg = "Unrecognized field stream_options"
    assert classify_degradable_error(
        422, msg, extra_classifiers=[stream_options_rejection], body=body
    ) == ("provider_specific")
    assert not stream_options_rejection(422, msg, {"model": "m"})
    assert not stream_options_rejection(500, msg, body)
    assert not stream_options_rejection(400, "bad field: stream", body)


def test_stop_rejection_wraps_the_custom_adapter_hook():
    classifier = stop_rejection(custom_should_retry_without_stop)
    body = {"model": "m", "stop": ["\nUser:"]}
    assert classifier(400, "Unsupported field: stop", body)
    assert classifier(422, "'stop' is not allowed for this model", body)
    assert not classifier(400, "stop sequence too long", body)  # no rejection word
    assert not classifier(None, "Unsupported field: stop", body)  # status must be known
    assert not classifier(400, "Unsupported field: stop", {"model": "m"})  # body lacks stop
    assert (
        classify_degradable_error(
            400, "Unsupported field: stop", extra_classifiers=[classifier], body=body
        )
        == "provider_specific"
    )


def test_describe_degradation_trigger_labels():
    assert describe_degradation_trigger("generic_400") == "generic HTTP 400"
    assert describe_degradation_trigger("opaque_5xx") == (
        "an opaque server error with no diagnostic message (5xx)"
    )
    assert describe_degradation_trigger(None, True) == "a multimodal/image-input rejection"
    assert describe_degradation_trigger(None) == "an error naming request parameters"


# --------------------------------------------------------------------------- rejected params


def test_extract_rejected_params_is_whole_word_case_insensitive_and_in_list_order():
    body = {"min_p": 0.1, "top_p": 1, "logit_bias": {}, "stream_options": {}, "temperature": 1}
    assert extract_rejected_params("TOP_P and min_p / logit_bias unsupported", body) == [
        "top_p",
        "min_p",
        "logit_bias",
    ]
    assert extract_rejected_params("my_min_p_override is invalid", body) == []
    assert extract_rejected_params("field 'stream_options' not permitted", body) == [
        "stream_options"
    ]


def test_extract_rejected_params_only_names_keys_of_the_failing_body():
    message = "Unrecognized request argument supplied: top_k"
    assert extract_rejected_params(message, {"top_p": 1}) == []
    assert extract_rejected_params(message, {"top_k": 40}) == ["top_k"]
    assert error_message_names_rejectable_param(message)
    assert not error_message_names_rejectable_param("Unrecognized request argument: seed")


def test_openai_unsupported_parameter_message_names_max_tokens_not_max_completion_tokens():
    message = (
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead."
    )
    assert extract_rejected_params(message, {"max_tokens": 10, "temperature": 1}) == ["max_tokens"]


# --------------------------------------------------------------------------- images


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Multimodal input is not enabled for this model", True),
        ("vLLM: multimodal not supported; relaunch with --enable-multimodal", True),
        ("MULTIMODAL features are NOT SUPPORTED", True),
        ("This model does not support image input", True),
        ("Image inputs are not supported by this endpoint", True),
        ("image content is not supported", True),
        ("Vision is not enabled for this deployment", True),
        ("multimodal model ready", False),
        # vLLM's real wording names no qualifier: the reference does not treat it as one
        ("facebook/opt-125m is not a multimodal model None", False),
        ("Unsupported parameter: top_p", False),
        ("", False),
    ],
)
def test_is_multimodal_rejection_table(message, expected):
    assert is_multimodal_rejection(message) is expected


def test_strip_replaces_all_images_of_a_message_with_one_counted_notice_at_the_first_image():
    second = {"type": "image", "source": {"type": "base64", "data": "AAAA"}}
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                IMAGE,
                {"type": "text", "text": "b"},
                second,
            ],
        },
    ]
    assert strip_image_blocks_with_notice(messages) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "text", "text": NOTICE_TWO},
                {"type": "text", "text": "b"},
            ],
        }
    ]


def test_strip_notice_wording_is_exact():
    assert image_strip_notice(1) == (
        "[System: An attached image was removed because this endpoint rejected image input. "
        "Do not guess or claim to see the image contents.]"
    )
    assert image_strip_notice(2) == NOTICE_TWO


def test_strip_adds_one_notice_per_message_and_leaves_other_messages_as_the_same_objects():
    plain = {"role": "system", "content": "text only"}
    text_parts = {"role": "user", "content": [{"type": "text", "text": "no images"}]}
    with_image = {"role": "user", "content": [IMAGE]}
    with_two = {"role": "user", "content": [IMAGE, IMAGE]}
    messages = [plain, text_parts, with_image, with_two]
    before = copy.deepcopy(messages)
    result = strip_image_blocks_with_notice(messages)
    assert result is not messages
    assert result[0] is plain and result[1] is text_parts
    assert result[2] == {
        "role": "user",
        "content": [{"type": "text", "text": IMAGE_STRIP_NOTICE_ONE}],
    }
    assert result[3] == {"role": "user", "content": [{"type": "text", "text": NOTICE_TWO}]}
    assert messages == before
    assert with_image["content"] == [IMAGE]


def test_image_block_helpers_ignore_string_content():
    messages = [
        {"role": "user", "content": "image_url"},
        {"role": "user", "content": [IMAGE, IMAGE]},
    ]
    assert count_image_blocks(messages) == 2
    assert messages_contain_image_blocks(messages)
    assert not messages_contain_image_blocks([{"role": "user", "content": "see image"}])


def test_build_image_strip_attempt_keeps_other_keys_and_is_none_without_images():
    body = openrouter_body()
    attempt = build_image_strip_attempt(body)
    assert attempt is not None and attempt.label == "targeted_strip_images"
    assert list(attempt.body) == list(body)
    assert count_image_blocks(attempt.body["messages"]) == 0
    assert build_image_strip_attempt({"model": "m", "messages": "hi"}) is None
    assert (
        build_image_strip_attempt({"model": "m", "messages": [{"role": "user", "content": "x"}]})
        is None
    )


def test_build_targeted_attempt_drops_every_named_param_at_once():
    attempt = build_targeted_attempt(
        {"model": "m", "min_p": 0.1, "logit_bias": {}, "top_p": 1}, ["min_p", "logit_bias"]
    )
    assert attempt == Attempt("targeted_drop_min_p+logit_bias", {"model": "m", "top_p": 1})


# --------------------------------------------------------------------------- the plan


def test_plan_starts_at_default_and_gives_up_on_a_non_degradable_error():
    plan = DegradationPlan(openrouter_body(), degrade_on_502=True)
    assert plan.current.label == "default"
    assert plan.on_failure(401, "No auth credentials found") is None
    assert plan.current.label == "default"
    assert plan.history == [FailureRecord(plan.current, 401, "No auth credentials found", None)]


def test_plan_walks_the_static_ladder_on_openrouter_502s():
    plan = DegradationPlan(openrouter_body(), degrade_on_502=True)
    seen = [plan.current.label]
    while (nxt := plan.on_failure(502, "Provider returned error")) is not None:
        seen.append(nxt.label)
    assert seen == labels(build_ladder(openrouter_body()))
    assert plan.path == seen
    assert plan.last_trigger == "backend incompatible with parameters (502)"
    assert [r.classification for r in plan.history] == ["backend_incompatible_502"] * len(seen)


def test_direct_provider_502_fails_fast():
    plan = DegradationPlan(openrouter_body())
    assert plan.on_failure(502, "Bad Gateway") is None


def test_targeted_drops_are_capped_at_three_with_one_extra_image_strip():
    plan = DegradationPlan(openrouter_body(), degrade_on_502=True)
    # 1: a joint rejection drops both params at once (no classifier kind needed)
    nxt = plan.on_failure(400, "min_p and logit_bias are not supported by this provider")
    assert nxt.label == "targeted_drop_min_p+logit_bias"
    assert plan.history[-1].classification is None
    assert plan.last_trigger == "an error naming request parameters"
    # 2, 3: each drop starts from the failing (already reduced) body
    assert plan.on_failure(400, "Unsupported parameter: 'top_p'").label == "targeted_drop_top_p"
    assert plan.on_failure(400, "temperature is not supported").label == "targeted_drop_temperature"
    assert plan.targeted_count == 3
    assert set(plan.current.body) == {"model", "messages", "stream", "stream_options", "tools"}
    # the image strip is a separate one-time allowance
    nxt = plan.on_failure(500, "Multimodal input is not enabled for this model")
    assert nxt.label == "targeted_strip_images"
    assert plan.last_trigger == "a multimodal/image-input rejection"
    assert count_image_blocks(nxt.body["messages"]) == 0
    assert set(nxt.body) == {"model", "messages", "stream", "stream_options", "tools"}
    # cap reached: a message naming stream_options no longer queues a drop ...
    assert plan.on_failure(400, "stream_options: unknown field") is None
    assert plan.targeted_count == 3


def test_after_the_cap_a_classified_error_falls_back_to_the_original_static_ladder():
    plan = DegradationPlan(openrouter_body(), degrade_on_502=True)
    plan.on_failure(400, "Unsupported parameter: min_p")
    plan.on_failure(400, "Unsupported parameter: top_p")
    plan.on_failure(400, "Unsupported parameter: logit_bias")
    nxt = plan.on_failure(400, "Unsupported parameter: temperature")
    assert nxt.label == "no_stream_options"  # still carries every param
    assert nxt.body == build_ladder(openrouter_body())[1].body
    assert plan.path == [
        "default",
        "targeted_drop_min_p",
        "targeted_drop_top_p",
        "targeted_drop_logit_bias",
        "no_stream_options",
    ]


def test_image_strip_is_allowed_once():
    plan = DegradationPlan(openrouter_body())
    assert (
        plan.on_failure(400, "This model does not support image input").label
        == "targeted_strip_images"
    )
    # without images in the failing body and with the allowance used, nothing queues
    assert plan.on_failure(400, "This model does not support image input") is None


def test_image_strip_queued_by_the_same_failure_runs_before_the_targeted_drop():
    plan = DegradationPlan(openrouter_body(), degrade_on_502=True)
    nxt = plan.on_failure(400, "Unsupported parameter: top_p. Image inputs are not supported.")
    assert nxt.label == "targeted_strip_images"
    assert "top_p" in nxt.body
    assert plan.on_failure(502, "Provider returned error").label == "targeted_drop_top_p"
    assert count_image_blocks(plan.current.body["messages"]) == 1


def test_targeted_drop_removes_a_later_identical_rung():
    body = {k: v for k, v in openrouter_body().items() if k != "stream_options"}
    plan = DegradationPlan(body, degrade_on_502=True)
    assert plan.on_failure(400, "Unsupported parameter: top_p").label == "targeted_drop_top_p"
    assert labels(plan.attempts) == [
        "default",
        "targeted_drop_top_p",
        "probe_drop_min_p",
        "probe_drop_logit_bias",
        "probe_drop_temperature",
        "strip_images",
        "probe_drop_tools",
        "minimal_payload",
    ]


def test_targeted_drop_equal_to_an_attempted_body_is_refused():
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "top_p": 0.9,
    }
    plan = DegradationPlan(body, degrade_on_502=True)
    nxt = plan.on_failure(400, "Unsupported parameters: top_p, stream_options")
    assert nxt.label == "targeted_drop_top_p+stream_options"
    assert nxt.body == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
    }
    assert plan.on_failure(502, "Provider returned error").label == "no_stream_options"
    # dropping top_p again would resend the body of attempt 2: refused, and nothing else applies
    assert plan.on_failure(400, "top_p is rejected") is None
    sent = [serialize_body(a.body) for a in plan.attempts[: plan.index + 1]]
    assert len(sent) == len(set(sent))


def test_plan_gives_up_when_the_last_rung_fails():
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "top_k": 3,
        "top_p": 0.9,
    }
    plan = DegradationPlan(body)
    assert plan.on_failure(400, "Bad Request").label == "probe_drop_top_p"
    assert plan.on_failure(400, "Bad Request").label == "probe_drop_top_k"
    assert plan.on_failure(400, "Bad Request").label == "minimal_payload"
    assert plan.on_failure(400, "Bad Request") is None


def test_targeted_strip_replaces_the_identical_static_strip_rung():
    body = {"model": "m", "messages": [{"role": "user", "content": [IMAGE]}], "stream": True}
    plan = DegradationPlan(body)
    assert labels(plan.attempts) == ["default", "strip_images"]
    nxt = plan.on_failure(400, "vision is not supported")
    assert nxt.label == "targeted_strip_images"
    assert labels(plan.attempts) == ["default", "targeted_strip_images"]
    assert plan.on_failure(400, "Bad Request") is None


def test_disabling_image_stripping_disables_the_targeted_strip_too():
    body = {"model": "m", "messages": [{"role": "user", "content": [IMAGE]}], "stream": True}
    plan = DegradationPlan(body, strip_images=False)
    assert labels(plan.attempts) == ["default"]
    assert plan.on_failure(400, "vision is not supported") is None


def test_plan_uses_extra_classifiers_against_the_current_body():
    body = {"model": "m", "messages": [], "stream": True, "stream_options": {"include_usage": True}}
    plan = DegradationPlan(body, extra_classifiers=[stream_options_rejection])
    nxt = plan.on_failure(422, '{"detail":"unexpected field stream_options"}')
    # the message names stream_options, so the targeted drop comes first
    assert nxt.label == "targeted_drop_stream_options"
    assert plan.history[-1].classification == "provider_specific"


def test_plan_never_drops_mandatory_keys_even_when_named():
    body = {"model": "m", "messages": [], "stream": True, "stop": ["x"], "top_p": 1}
    plan = DegradationPlan(body, mandatory_keys=("model", "messages", "stream", "stop"))
    assert plan.on_failure(400, "stop and top_p unsupported").label == "targeted_drop_top_p"
    assert "stop" in plan.current.body


def test_plan_does_not_mutate_the_request_body_and_caches_nothing_across_requests():
    body = openrouter_body()
    before = copy.deepcopy(body)
    first = DegradationPlan(body, degrade_on_502=True)
    first.on_failure(400, "Unsupported parameter: min_p")
    first.on_failure(400, "image input is not supported")
    first.current.body["messages"].append({"role": "user", "content": "x"})
    assert body == before
    second = DegradationPlan(body, degrade_on_502=True)
    assert second.current.label == "default"
    assert second.targeted_count == 0 and not second.image_strip_queued
    assert labels(second.attempts) == labels(build_ladder(body))


# --------------------------------------------------------------------------- properties

KEYS = (
    "model",
    "messages",
    "stream",
    "stream_options",
    "tools",
    "thinking",
    "seed",
    "reasoning",
    *PARAM_DROP_PRIORITY,
)
JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=3))
CONTENT_BLOCK = st.one_of(
    st.just({"type": "text", "text": "t"}),
    st.just({"type": "image_url", "image_url": {"url": "u"}}),
    st.just({"type": "image", "source": {}}),
)
MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant"]),
        "content": st.one_of(st.text(max_size=3), st.lists(CONTENT_BLOCK, max_size=3)),
    }
)
BODIES = st.dictionaries(
    st.sampled_from(KEYS),
    JSON_SCALARS,
    max_size=len(KEYS),
).flatmap(
    lambda d: st.builds(
        lambda messages, dd=d: {**dd, "messages": messages} if "messages" in dd else dd,
        st.lists(MESSAGE, max_size=3),
    )
)
MANDATORY = st.lists(
    st.sampled_from(("model", "messages", "stream", "thinking", "stop")), unique=True
)


@settings(max_examples=300, deadline=None)
@given(
    body=BODIES,
    mandatory=MANDATORY,
    strip=st.booleans(),
    priority=st.lists(st.sampled_from(KEYS), max_size=3, unique=True),
)
def test_ladder_never_repeats_a_body_and_every_rung_keeps_the_mandatory_keys(
    body, mandatory, strip, priority
):
    before = json.dumps(body, sort_keys=True)
    ladder = build_ladder(
        body, mandatory_keys=mandatory, priority_keys=priority, strip_images=strip
    )
    serialized = [serialize_body(a.body) for a in ladder]
    assert len(serialized) == len(set(serialized))
    assert ladder[0].label == "default"
    for attempt in ladder:
        for key in mandatory:
            if key in body:
                assert key in attempt.body
    assert json.dumps(body, sort_keys=True) == before


FAILURES = st.lists(
    st.tuples(
        st.sampled_from([None, 400, 404, 422, 429, 500, 502, 503]),
        st.sampled_from(
            [
                "",
                "Bad Request",
                "Unsupported parameter: top_p",
                "min_p and logit_bias rejected",
                "stream_options: unknown field",
                "image input is not supported",
                "No endpoints found for m",
                "temperature, max_tokens and stop are invalid",
                "rate limited",
            ]
        ),
    ),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(body=BODIES, failures=FAILURES, on_502=st.booleans(), opaque=st.booleans())
def test_plan_never_sends_the_same_body_twice_and_respects_the_caps(body, failures, on_502, opaque):
    mandatory = ("model", "messages", "stream")
    plan = DegradationPlan(body, degrade_on_502=on_502, degrade_on_opaque_5xx=opaque)
    sent = [serialize_body(plan.current.body)]
    for status, message in failures:
        nxt = plan.on_failure(status, message)
        if nxt is None:
            break
        sent.append(serialize_body(nxt.body))
        for key in mandatory:
            if key in body:
                assert key in nxt.body
    assert len(sent) == len(set(sent))
    assert plan.targeted_count <= MAX_TARGETED_DEGRADATION_ATTEMPTS
    assert sum(label == "targeted_strip_images" for label in plan.path) <= 1


def _plan_trace(plan, failures):
    """Everything a caller can see of ``plan`` over ``failures``, rung by rung."""
    trace = [(plan.current.label, serialize_body(plan.current.body), plan.index)]
    for status, message in failures:
        nxt = plan.on_failure(status, message)
        trace.append(None if nxt is None else (nxt.label, serialize_body(nxt.body), plan.index))
        if nxt is None:
            break
    ladder = [(a.label, serialize_body(a.body)) for a in plan.attempts]
    history = [(h.attempt.label, h.status, h.message, h.classification) for h in plan.history]
    counts = (plan.targeted_count, plan.image_strip_queued, plan.last_trigger)
    return trace, ladder, history, list(plan.path), counts


@settings(max_examples=300, deadline=None)
@given(
    body=BODIES,
    failures=FAILURES,
    mandatory=MANDATORY,
    strip=st.booleans(),
    priority=st.lists(st.sampled_from(KEYS), max_size=3, unique=True),
    on_502=st.booleans(),
    change=st.sampled_from([None, "add", "delete", "index"]),
)
def test_plan_built_lazily_behaves_as_one_whose_whole_ladder_was_built_up_front(
    body, failures, mandatory, strip, priority, on_502, change
):
    def new_plan():
        return DegradationPlan(
            body,
            mandatory_keys=mandatory,
            priority_keys=priority,
            strip_images=strip,
            degrade_on_502=on_502,
        )

    before = json.dumps(body, sort_keys=True)
    lazy = new_plan()
    eager = new_plan()
    eager_ladder = [(a.label, serialize_body(a.body)) for a in eager.attempts]  # built now
    assert eager_ladder == [
        (a.label, serialize_body(a.body))
        for a in build_ladder(
            body, mandatory_keys=mandatory, priority_keys=priority, strip_images=strip
        )
    ]
    assert lazy.current is lazy.current  # the default rung: one object, handed out as is
    first = lazy.current
    for plan in (lazy, eager):  # what a caller may do before the first failure
        if change == "add":  # a key added to the body it sends
            plan.current.body["stream_options"] = {"include_usage": True}
        elif change == "delete" and plan.current.body:  # one taken out
            del plan.current.body[next(iter(plan.current.body))]
        elif change == "index" and len(eager.attempts) > 1:  # a rung chosen by hand
            plan.index = 1
    assert _plan_trace(lazy, failures) == _plan_trace(eager, failures)
    assert lazy.attempts[0] is first
    assert json.dumps(body, sort_keys=True) == before


def test_plan_ladder_can_be_replaced_before_it_is_built():
    plan = DegradationPlan({"model": "m", "messages": [], "stream": True, "seed": 4})
    mine = [plan.current, Attempt("mine", {"model": "m", "messages": []})]
    plan.attempts = mine
    assert plan.attempts is mine
    assert plan.on_failure(400, "Bad Request") is mine[1]
    assert plan.path == ["default", "mine"]


def test_plan_refuses_to_queue_the_default_body_again_before_any_failure():
    body = {"model": "m", "messages": [], "stream": True, "seed": 4}
    plan = DegradationPlan(body)
    assert not plan._insert_after_current(Attempt("again", dict(body)))


def test_plan_builds_only_the_default_rung_until_a_failure():
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    body |= {"stream_options": {"include_usage": True}, "top_p": 1, "seed": 4}
    plan = DegradationPlan(body)
    assert plan._ladder is None
    assert (plan.current.label, plan.current.body, plan.path) == ("default", body, ["default"])
    assert plan.current.body is not body and plan.current.body["messages"] is not body["messages"]
    body["messages"].append({"role": "user", "content": "changed after the plan was made"})
    body["top_p"] = 0.5
    nxt = plan.on_failure(400, "Bad Request")
    assert nxt is not None and nxt.label == "no_stream_options"
    assert nxt.body == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "top_p": 1,
        "seed": 4,
    }
    assert [a.label for a in plan.attempts] == [
        "default",
        "no_stream_options",
        "probe_drop_top_p",
        "probe_drop_seed",
        "minimal_payload",
    ]


class _Opaque:
    """A value a JSON body does not hold: deepcopy's own rules copy it."""

    def __init__(self, items: list) -> None:
        self.items = items

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Opaque) and other.items == self.items


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=4), inner, max_size=4)
        | st.tuples(inner, inner)
        | st.builds(_Opaque, st.lists(inner, max_size=2))
    ),
    max_leaves=25,
)


def _shape(value, seen: dict[int, int]) -> object:
    """``value``'s structure with each container's identity as the order it was first met:
    two copies with equal shapes share sub-objects alike."""
    if isinstance(value, dict | list | tuple | _Opaque):
        tag = seen.setdefault(id(value), len(seen))
        items = value.items if isinstance(value, _Opaque) else value
        inner = items.items() if isinstance(items, dict) else enumerate(items)
        return (type(value).__name__, tag, [(k, _shape(v, seen)) for k, v in inner])
    return (type(value).__name__, value)


@settings(max_examples=300, deadline=None)
@given(_JSONISH, st.data())
def test_a_plan_copies_its_body_as_deepcopy_would_shared_parts_and_all(value, data):
    from lab.degrade import _without

    shared = data.draw(st.sampled_from([value, [value, value], {"a": value, "b": [value]}]))
    body = {"model": "m", "messages": shared, "stream": True}
    mine, theirs = _without(body, ()), {k: copy.deepcopy(v) for k, v in body.items()}
    assert mine == theirs
    assert _shape(mine, {}) == _shape(theirs, {})
    originals: set[int] = set()
    _shape(body, {})
    stack = [body]
    while stack:  # no container of the copy is one of the body's
        item = stack.pop()
        if isinstance(item, dict | list):
            originals.add(id(item))
            stack.extend(item.values() if isinstance(item, dict) else item)
    copies = []
    stack = [mine]
    while stack:
        item = stack.pop()
        if isinstance(item, dict | list):
            copies.append(id(item))
            stack.extend(item.values() if isinstance(item, dict) else item)
    assert not originals & set(copies)


def test_a_plan_serializes_its_body_at_the_first_failure_not_up_front(monkeypatch):
    # nearly every request succeeds at once; a long conversation took ~0.6 ms to serialize
    import lab.degrade

    calls: list[int] = []
    real = lab.degrade.serialize_body

    def counted(body):
        calls.append(1)
        return real(body)

    monkeypatch.setattr(lab.degrade, "serialize_body", counted)
    given = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "top_k": 5}
    plan = DegradationPlan(given)
    assert plan.current.body == given
    assert calls == []
    plan.current.body["top_k"] = 6  # the caller changes what it sends
    nxt = plan.on_failure(400, "Unrecognized request argument supplied: top_k")
    assert nxt is not None and "top_k" not in nxt.body
    assert real(given) in plan._attempted  # the default as it was given
    assert calls
