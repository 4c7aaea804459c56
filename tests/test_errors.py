"""Provider error normalization per wire family and the message classifiers.

The rules: docs/reference.md, "3.9 OpenRouter error mapping";
docs/reference.md, "8.1 Message classifiers";
docs/reference.md, "8.2 OpenAI-compatible status classification";
docs/reference.md, "5.3 Gemini errors".
Bodies are the realistic ones of docs/reference.md, "1. Wire formats"."""

from __future__ import annotations

import json

import pytest

from lab.errors import (
    BALANCE_EXHAUSTED_PATTERNS,
    CONTEXT_LENGTH_PATTERNS,
    CREDIT_AFFORDABILITY_PATTERNS,
    MODEL_ERROR_PATTERNS,
    StatusClassification,
    anthropic_stream_error,
    classify_error,
    classify_openai_compatible_status,
    collect_error_messages,
    google_block_error,
    google_provider_error,
    google_stream_error,
    is_account_balance_exhausted_error,
    is_credit_affordability_error,
    is_model_error_message,
    is_openrouter_malformed_tool_call_error,
    normalize_http_error,
    openai_compatible_provider_error,
    openai_compatible_stream_error,
    openrouter_error_type,
    openrouter_http_failure_message,
    openrouter_provider_error,
    openrouter_stream_error,
    parse_error_message,
    parse_status_code,
    provider_error_detail,
)
from lab.model import ProviderError
from lab.providers import get_adapter

OR_402 = (
    "This request requires more credits, or fewer max_tokens. You requested up to 32000 "
    "tokens, but can only afford 27342. To increase, visit https://openrouter.ai/settings/credits "
    "and upgrade to a paid account"
)
OR_PRIVACY = (
    "No endpoints found matching your data policy (Paid model training). "
    "Configure: https://openrouter.ai/settings/privacy"
)
OR_429_RAW = (
    "deepseek/deepseek-chat-v3-0324:free is temporarily rate-limited upstream. Please retry "
    "shortly, or add your own key to accumulate your rate limits: "
    "https://openrouter.ai/settings/integrations"
)
OPENAI_QUOTA = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, read the docs: "
    "https://platform.openai.com/docs/guides/error-codes/api-errors."
)
VLLM_CONTEXT = (
    "This model's maximum context length is 6048 tokens. However, you requested 6616 tokens "
    "(568 in the messages, 6048 in the completion). Please reduce the length of the messages "
    "or completion."
)
NIM_404 = (
    "Function '23d4f03a-b8a6-4adb-a183-7daa083a09cc': Not found for account "
    "'Qawmu2vUw3rdcREnubcAVqe1c55nUTb1hCogKQx4BCA'"
)
GEMINI_QUOTA = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
)


def j(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False)


# (provider, status, body, type, code, retryable, message)
HTTP_TABLE = [
    # ---- OpenRouter: error.metadata.raw first, then error.message; mapErrorCodeToType
    (
        "openrouter",
        400,
        j(
            {
                "error": {"message": "claude-sonnet-4-6 is not a valid model ID", "code": 400},
                "user_id": "user_2vJp",
            }
        ),
        "api_error",
        "400",
        False,
        "OpenRouter API error (400): claude-sonnet-4-6 is not a valid model ID",
    ),
    (
        "openrouter",
        401,
        j({"error": {"message": "No auth credentials found", "code": 401}}),
        "api_error",
        "401",
        False,
        "OpenRouter API error (401): No auth credentials found",
    ),
    (
        "openrouter",
        402,
        j(
            {
                "error": {"message": OR_402, "code": 402, "metadata": {"provider_name": None}},
                "user_id": "u",
            }
        ),
        "api_error",
        "402",
        False,
        f"OpenRouter API error (402): {OR_402}",
    ),
    (
        "openrouter",
        404,
        j({"error": {"message": "No endpoints found that support tool use.", "code": 404}}),
        "api_error",
        "404",
        False,
        "OpenRouter API error (404): No endpoints found that support tool use.",
    ),
    (
        "openrouter",
        408,
        j({"error": {"message": "Request timed out", "code": 408}}),
        "timeout",
        "408",
        True,
        "OpenRouter API error (408): Request timed out",
    ),
    (
        "openrouter",
        429,
        j(
            {
                "error": {
                    "message": "Provider returned error",
                    "code": 429,
                    "metadata": {"raw": OR_429_RAW, "provider_name": "Chutes"},
                },
                "user_id": "u",
            }
        ),
        "rate_limit",
        "429",
        True,
        f"OpenRouter API error (429): {OR_429_RAW}",
    ),
    (
        "openrouter",
        500,
        j({"error": {"message": "Internal Server Error", "code": 500}}),
        "unknown",  # the reference quirk: 500 has no row of its own
        "500",
        False,
        "OpenRouter API error (500): Internal Server Error",
    ),
    (
        "openrouter",
        502,
        j(
            {
                "error": {
                    "message": "Provider returned error",
                    "code": 502,
                    "metadata": {"raw": "upstream connect error", "provider_name": "Together"},
                }
            }
        ),
        "provider_overloaded",
        "502",
        True,
        "OpenRouter API error (502): upstream connect error",
    ),
    (
        "openrouter",
        503,
        j(
            {
                "error": {
                    "message": "Provider returned error",
                    "code": 503,
                    "metadata": {
                        "raw": {
                            "error": {
                                "type": "Service Unavailable",
                                "code": "no_available_workers",
                                "message": "No available workers",
                            }
                        },
                        "provider_name": "Morph",
                    },
                }
            }
        ),
        "provider_overloaded",
        "503",
        True,
        'OpenRouter API error (503): {"error":{"type":"Service Unavailable","code":"no_available_workers","message":"No available workers"}}',
    ),
    # ---- OpenAI
    (
        "openai",
        400,
        j(
            {
                "error": {
                    "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
                    "type": "invalid_request_error",
                    "param": "max_tokens",
                    "code": "unsupported_parameter",
                }
            }
        ),
        "api_error",
        "400",
        False,
        "OpenAI: HTTP 400: Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
    ),
    (
        "openai",
        404,
        j(
            {
                "error": {
                    "message": "The model `gpt-9` does not exist or you do not have access to it.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "model_not_found",
                }
            }
        ),
        # the message decides, and it matches no model-error pattern
        # (LabConfig.body_error_codes reads the code too: BODY_CODE_CASES)
        "api_error",
        "404",
        False,
        "OpenAI: HTTP 404: The model `gpt-9` does not exist or you do not have access to it.",
    ),
    (
        "openai",
        429,
        j(
            {
                "error": {
                    "message": OPENAI_QUOTA,
                    "type": "insufficient_quota",
                    "param": None,
                    "code": "insufficient_quota",
                }
            }
        ),
        "rate_limit",  # the reference's 429 re-code list does not name quota wording
        "429",
        True,
        f"OpenAI: HTTP 429: {OPENAI_QUOTA}",
    ),
    (
        "openai",
        500,
        j(
            {
                "error": {
                    "message": "The server had an error while processing your request. Sorry about that!",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            }
        ),
        "provider_overloaded",
        "500",
        True,
        "OpenAI: HTTP 500: The server had an error while processing your request. Sorry about that!",
    ),
    # ---- DeepSeek
    (
        "deepseek",
        402,
        j(
            {
                "error": {
                    "message": "Insufficient Balance",
                    "type": "unknown_error",
                    "param": None,
                    "code": "invalid_request_error",
                }
            }
        ),
        "api_error",
        "402",
        False,
        "DeepSeek: HTTP 402: Insufficient Balance",
    ),
    (
        "deepseek",
        401,
        j(
            {
                "error": {
                    "message": "Authentication Fails, Your api key: ****fcc2 is invalid",
                    "type": "authentication_error",
                    "param": None,
                    "code": "invalid_request_error",
                }
            }
        ),
        "api_error",
        "401",
        False,
        "DeepSeek: HTTP 401: Authentication Fails, Your api key: ****fcc2 is invalid",
    ),
    (
        "deepseek",
        503,
        j({"error": {"message": "Server Overloaded", "type": "server_error"}}),
        "provider_overloaded",
        "503",
        True,
        "DeepSeek: HTTP 503: Server Overloaded",
    ),
    # ---- Z.ai: billing under 429 never reads as a rate limit
    (
        "zai",
        429,
        j(
            {
                "error": {
                    "code": "1113",
                    "message": "Insufficient balance or no resource package. Please recharge.",
                }
            }
        ),
        "api_error",
        "429_balance",
        False,
        "Z.ai: HTTP 429: Insufficient balance or no resource package. Please recharge.",
    ),
    (
        "zai",
        429,
        j({"error": {"code": "1113", "message": "余额不足或无可用资源包,请充值。"}}),
        # the reference re-codes a 429 on English phrases only (body_error_codes: BODY_CODE_CASES)
        "rate_limit",
        "429",
        True,
        "Z.ai: HTTP 429: 余额不足或无可用资源包,请充值。",
    ),
    (
        "zai",
        429,
        j({"error": {"code": "1311", "message": "当前订阅套餐暂未开放GLM-5权限"}}),
        "rate_limit",
        "429",
        True,
        "Z.ai: HTTP 429: 当前订阅套餐暂未开放GLM-5权限",
    ),
    (
        "zai",
        429,
        j(
            {
                "error": {
                    "code": "1302",
                    "message": "High concurrency usage of this API, please reduce concurrency",
                }
            }
        ),
        "rate_limit",
        "429",
        True,
        "Z.ai: HTTP 429: High concurrency usage of this API, please reduce concurrency",
    ),
    # ---- NVIDIA NIM: RFC-7807 problem JSON
    (
        "nvidia",
        429,
        j({"status": 429, "title": "Too Many Requests"}),
        "rate_limit",
        "429",
        True,
        "NVIDIA: HTTP 429: Too Many Requests",
    ),
    (
        "nvidia",
        404,
        j({"status": 404, "title": "Not Found", "detail": NIM_404}),
        "api_error",
        "404",
        False,
        f"NVIDIA: HTTP 404: {NIM_404}",
    ),
    (
        "nvidia",
        403,
        j({"status": 403, "title": "Forbidden", "detail": "Authorization failed"}),
        "api_error",
        "403",
        False,
        "NVIDIA: HTTP 403: Authorization failed",
    ),
    (
        "nvidia",
        404,
        "404 page not found",
        "api_error",
        "404",
        False,
        "NVIDIA: HTTP 404: 404 page not found",
    ),
    (
        "nvidia",
        500,
        "",
        "provider_overloaded",
        "500",
        True,
        "NVIDIA: HTTP 500: Internal Server Error",
    ),
    # ---- Custom (vLLM old flat shape)
    (
        "custom",
        400,
        j(
            {
                "object": "error",
                "message": VLLM_CONTEXT,
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        ),
        "api_error",
        "400",
        False,
        f"Custom: HTTP 400: {VLLM_CONTEXT}",
    ),
    (
        "custom",
        502,
        "<html><body>502 Bad Gateway</body></html>",
        "provider_overloaded",
        "502",
        True,
        "Custom: HTTP 502: <html><body>502 Bad Gateway</body></html>",
    ),
    (
        "custom",
        504,
        j({"detail": {"reason": "upstream timeout"}}),
        "timeout",
        "504",
        True,
        'Custom: HTTP 504: {"reason":"upstream timeout"}',
    ),
    # ---- Google
    (
        "google",
        400,
        j(
            {
                "error": {
                    "code": 400,
                    "message": "API key not valid. Please pass a valid API key.",
                    "status": "INVALID_ARGUMENT",
                }
            }
        ),
        "api_error",
        "400",
        False,
        "Google API error (400): API key not valid. Please pass a valid API key.",
    ),
    (
        "google",
        429,
        j(
            {
                "error": {
                    "code": 429,
                    "message": GEMINI_QUOTA,
                    "status": "RESOURCE_EXHAUSTED",
                    "details": [
                        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "26s"}
                    ],
                }
            }
        ),
        "rate_limit",
        "429",
        True,
        f"Google API error (429): {GEMINI_QUOTA}",
    ),
    (
        "google",
        500,
        j({"error": {"code": 500, "message": "Internal error encountered.", "status": "INTERNAL"}}),
        "api_error",  # the reference quirk: Google's 500 is an api_error ...
        "500",
        True,  # ... that is retryable
        "Google API error (500): Internal error encountered.",
    ),
    (
        "google",
        503,
        '[{\n  "error": {\n    "code": 503,\n    "message": "The model is overloaded. Please try again later.",\n    "status": "UNAVAILABLE"\n  }\n}\n]',
        "provider_overloaded",
        "503",
        True,
        "Google API error (503): The model is overloaded. Please try again later.",
    ),
    (
        "google",
        504,
        j(
            {
                "error": {
                    "code": 504,
                    "message": "Deadline expired before operation could complete.",
                    "status": "DEADLINE_EXCEEDED",
                }
            }
        ),
        "timeout",
        "504",
        True,
        "Google API error (504): Deadline expired before operation could complete.",
    ),
    # ---- Anthropic
    (
        "anthropic",
        529,
        j(
            {
                "type": "error",
                "error": {"type": "overloaded_error", "message": "Overloaded"},
                "request_id": "req_011CS",
            }
        ),
        "provider_overloaded",
        "overloaded_error",
        True,
        "Anthropic API error (overloaded_error): Overloaded",
    ),
    (
        "anthropic",
        529,
        "",
        "provider_overloaded",
        "529",
        True,
        "Anthropic API error (529): Unknown error",
    ),
    (
        "anthropic",
        400,
        j(
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 205351 tokens > 200000 maximum",
                },
            }
        ),
        "api_error",
        "invalid_request_error",
        False,
        "Anthropic API error (invalid_request_error): prompt is too long: 205351 tokens > 200000 maximum",
    ),
    (
        "anthropic",
        401,
        j(
            {
                "type": "error",
                "error": {"type": "authentication_error", "message": "invalid x-api-key"},
            }
        ),
        "api_error",
        "authentication_error",
        False,
        "Anthropic API error (authentication_error): invalid x-api-key",
    ),
    (
        "anthropic",
        404,
        j({"type": "error", "error": {"type": "not_found_error", "message": "model: claude-x"}}),
        "model_error",
        "404_model",
        False,
        "Anthropic API error (not_found_error): model: claude-x",
    ),
    (
        "anthropic",
        429,
        j(
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "Number of request tokens has exceeded your per-minute rate limit",
                },
            }
        ),
        "rate_limit",
        "rate_limit_error",
        True,
        "Anthropic API error (rate_limit_error): Number of request tokens has exceeded your per-minute rate limit",
    ),
    (
        "anthropic",
        500,
        j({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}),
        "api_error",
        "api_error",
        True,
        "Anthropic API error (api_error): Internal server error",
    ),
    (
        "anthropic",  # Z.ai's Anthropic route: billing under a rate_limit_error type
        429,
        j(
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "code": "1113",
                    "message": "[1113][Insufficient balance or no resource package. Please recharge.][2026092223]",
                },
            }
        ),
        "api_error",
        "429_balance",
        False,
        "Anthropic API error (rate_limit_error): [1113][Insufficient balance or no resource package. Please recharge.][2026092223]",
    ),
]


@pytest.mark.parametrize(
    ("provider", "status", "body", "type_", "code", "retryable", "message"),
    HTTP_TABLE,
    ids=[f"{row[0]}-{row[1]}-{i}" for i, row in enumerate(HTTP_TABLE)],
)
def test_normalize_http_error_table(provider, status, body, type_, code, retryable, message):
    error = normalize_http_error(provider, status, body)
    assert (error.type, error.code, error.retryable, error.message) == (
        type_,
        code,
        retryable,
        message,
    )
    assert error.status == status
    expected = {"provider": provider, "status": status, "body": body}
    parsed = json.loads(body) if body.startswith("{") else None
    if get_adapter(provider).family == "openai_compatible" and isinstance(
        (parsed or {}).get("error"), dict
    ):
        expected["error"] = parsed["error"]  # the body's own error object, as evidence
    assert error.original_error == expected


BODY_CODE_CASES = [
    (
        "openai",
        404,
        j({"error": {"message": "The model `gpt-9` does not exist.", "code": "model_not_found"}}),
        ("model_error", "404_model", False),
    ),
    (
        "zai",
        429,
        j({"error": {"code": "1113", "message": "余额不足"}}),
        ("api_error", "429_balance", False),
    ),
    (
        "zai",
        429,
        j({"error": {"code": "1309", "message": "套餐已到期"}}),
        ("api_error", "429_plan_access", False),
    ),
]


@pytest.mark.parametrize(("provider", "status", "body", "expected"), BODY_CODE_CASES)
def test_body_error_codes_let_the_error_code_decide_as_a_lab_addition(
    provider, status, body, expected
):
    on = normalize_http_error(provider, status, body, body_error_codes=True)
    off = normalize_http_error(provider, status, body)
    assert (on.type, on.code, on.retryable) == expected
    assert (off.type, off.code) != (on.type, on.code)  # the reference reads the message only


def test_normalize_http_error_rejects_an_unknown_provider():
    with pytest.raises(ValueError, match="unknown provider 'acme-llm'"):
        normalize_http_error("acme-llm", 400, "{}")


# --------------------------------------------------------------------------- OpenRouter


def test_openrouter_privacy_rejection_becomes_a_privacy_policy_api_error():
    error = normalize_http_error(
        "openrouter", 404, j({"error": {"message": OR_PRIVACY, "code": 404}})
    )
    assert error.type == "api_error" and not error.retryable and error.code == "404"
    assert error.message == (
        "OpenRouter Privacy Policy Error: The selected model requires allowing data for paid "
        "model training, but your account privacy settings block this.\n\n"
        f"Original error: {OR_PRIVACY}"
    )


def test_openrouter_http_error_keeps_the_extracted_message_as_user_message():
    error = normalize_http_error("openrouter", 402, j({"error": {"message": OR_402, "code": 402}}))
    assert error.user_message == OR_402


@pytest.mark.parametrize(
    ("code", "message", "expected"),
    [
        ("400", "bad", ("api_error", False)),
        ("413", "Payload Too Large", ("api_error", False)),
        ("unknown", "upstream said 404", ("api_error", False)),  # substring of the message
        ("429", "upstream returned 400", ("api_error", False)),  # "400" row comes first
        ("408", "x", ("timeout", True)),
        (429, "x", ("rate_limit", True)),
        ("503", "x", ("provider_overloaded", True)),
        ("server_error", "Gateway Timeout", ("timeout", True)),
        ("server_error", "Content violates policy", ("content_blocked", False)),
        ("500", "Internal Server Error", ("unknown", False)),
        (None, "", ("unknown", False)),
    ],
)
def test_openrouter_error_type_table(code, message, expected):
    assert openrouter_error_type(code, message) == expected


def test_openrouter_http_failure_message_names_model_sorted_params_and_attempt():
    request = {"model": "z-ai/glm-4.6", "messages": [], "stream": True, "top_p": 1}
    body = j({"error": {"message": OR_402, "code": 402}})
    assert openrouter_http_failure_message(402, body, request, "default") == (
        f"HTTP 402 (402): {OR_402} | model: z-ai/glm-4.6 | "
        "request_params: messages, model, stream, top_p | request_attempt: default"
    )


def test_openrouter_http_failure_message_appends_the_raw_body_of_a_generic_400_truncated():
    body = j({"error": {"message": "Bad Request", "pad": "x" * 4000}})
    message = openrouter_http_failure_message(400, body, {"messages": []}, "minimal_payload")
    assert message.startswith("HTTP 400: Bad Request | raw_response: " + body[:3000] + "… | ")
    assert message.endswith(
        " | model: other-model | request_params: messages | request_attempt: minimal_payload"
    )
    error = openrouter_provider_error(400, message)
    assert (error.type, error.code) == ("api_error", "400")


def test_openrouter_provider_error_defaults():
    error = openrouter_provider_error(None, None)
    assert (error.type, error.code, error.message) == (
        "unknown",
        "unknown",
        "OpenRouter API error (unknown): Unknown error",
    )


@pytest.mark.parametrize(
    ("error_obj", "type_", "code", "retryable", "status", "message"),
    [
        (
            {"code": "server_error", "message": "Provider disconnected unexpectedly"},
            "unknown",
            "server_error",
            False,
            None,
            "Provider disconnected unexpectedly",
        ),
        (
            {
                "code": 502,
                "message": "JSON error injected into SSE stream",
                "metadata": {"error_type": "provider_unavailable"},
            },
            "provider_overloaded",
            "502",
            True,
            502,
            "JSON error injected into SSE stream",
        ),
        (
            {
                "error": {
                    "message": "Upstream error from AtlasCloud: Unexpected token 173781 while expecting start token 200006",
                    "code": "502",
                    "metadata": {
                        "raw": {"object": "error", "code": 400},
                        "provider_name": "AtlasCloud",
                    },
                }
            },
            "provider_overloaded",
            "502",
            True,
            502,
            "Upstream error from AtlasCloud: Unexpected token 173781 while expecting start token 200006",
        ),
        (
            {
                "code": 429,
                "message": "Provider returned error",
                "metadata": {"raw": "glm-4.6 is rate-limited upstream"},
            },
            "rate_limit",
            "429",
            True,
            429,
            "glm-4.6 is rate-limited upstream",
        ),
        ({}, "unknown", "unknown", False, None, "OpenRouter API error"),
    ],
)
def test_openrouter_stream_error_table(error_obj, type_, code, retryable, status, message):
    error = openrouter_stream_error(error_obj)
    assert (error.type, error.code, error.retryable, error.status, error.message) == (
        type_,
        code,
        retryable,
        status,
        message,
    )


def test_openrouter_stream_error_passes_a_preformed_provider_error_through():
    preformed = {"type": "rate_limit", "message": "slow down", "retryable": True, "code": "429"}
    assert openrouter_stream_error(preformed) == ProviderError(
        type="rate_limit", message="slow down", retryable=True, code="429"
    )
    already = ProviderError(type="timeout", message="t", retryable=True)
    assert openrouter_stream_error(already) is already


def test_openrouter_malformed_tool_call_error_needs_the_exact_code():
    assert is_openrouter_malformed_tool_call_error(
        {"code": "invalid_type", "message": "expected string, received null"}
    )
    # the malformed-tool-call test is a case-sensitive "contains", as the adapter applies it
    assert not is_openrouter_malformed_tool_call_error(
        {"code": "invalid_type", "message": "Expected string, received null"}
    )
    assert is_openrouter_malformed_tool_call_error(
        {"error": {"code": "invalid_type", "message": "invalid_type at path"}}
    )
    assert not is_openrouter_malformed_tool_call_error(
        {"code": "invalid_request", "message": "expected string"}
    )
    assert not is_openrouter_malformed_tool_call_error(
        {"code": "invalid_type", "message": "bad tool"}
    )


def test_an_error_object_shaped_like_a_provider_error_passes_with_an_unknown_type_as_unknown():
    from lab.errors import is_provider_error_shape

    shaped = {"type": "weird", "message": "x", "retryable": True, "userMessage": "hi"}
    assert is_provider_error_shape(shaped)
    assert openrouter_stream_error(shaped) == ProviderError(
        type="unknown", message="x", retryable=True, user_message="hi"
    )
    assert not is_provider_error_shape({"type": "api_error", "retryable": True})  # no message


# --------------------------------------------------------------------------- OpenAI-compatible


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (None, "x", ("unknown", "unknown", False)),
        (400, "x", ("api_error", "400", False)),
        (403, "x", ("api_error", "403", False)),
        (429, "Insufficient balance or no resource package", ("api_error", "429_balance", False)),
        (429, "Not enough credits", ("api_error", "429_balance", False)),
        (429, "Please RECHARGE", ("api_error", "429_balance", False)),
        (
            429,
            "Your subscription plan does not yet include access to GLM-5",
            ("api_error", "429_plan_access", False),
        ),
        (429, "Rate limit reached", ("rate_limit", "429", True)),
        (408, "x", ("timeout", "408", True)),
        (504, "x", ("timeout", "504", True)),
        (500, "x", ("provider_overloaded", "500", True)),
        (502, "x", ("provider_overloaded", "502", True)),
        (503, "x", ("provider_overloaded", "503", True)),
        (402, "Insufficient Balance", ("api_error", "402", False)),
        (422, "x", ("api_error", "422", False)),
    ],
)
def test_classify_openai_compatible_status_table(status, message, expected):
    assert classify_openai_compatible_status(status, message) == StatusClassification(*expected)


def test_openai_compatible_model_error_keeps_the_providers_supported_model_list():
    body = j(
        {
            "error": {
                "message": "Unsupported model 'llama-9'. Supported models: qwen2.5-7b-instruct, llama-3.1-8b-instruct",
                "type": "invalid_request_error",
            }
        }
    )
    error = normalize_http_error("custom", 400, body)
    assert (error.type, error.code, error.retryable) == ("model_error", "400_model", False)
    assert error.message == (
        "Custom: HTTP 400: Unsupported model 'llama-9'. Supported models: "
        "qwen2.5-7b-instruct, llama-3.1-8b-instruct"
    )
    assert classify_error(error) == "model_error"


@pytest.mark.parametrize(
    ("message", "type_", "code", "retryable"),
    [
        ("connect ECONNREFUSED 127.0.0.1:8000", "api_error", "ECONNREFUSED", False),
        ("Connection refused by upstream", "api_error", "ECONNREFUSED", False),
        ("Request timeout after 60000ms", "timeout", "unknown", True),
        ("HTTP 502: read timeout", "timeout", "502", True),
        ("HTTP 404: Model llama-9 not found", "model_error", "404_model", False),
    ],
)
def test_openai_compatible_provider_error_message_rules(message, type_, code, retryable):
    error = openai_compatible_provider_error("custom", message)
    assert (error.type, error.code, error.retryable) == (type_, code, retryable)
    assert error.message == f"Custom: {message}"


@pytest.mark.parametrize(
    ("provider", "error_obj", "type_", "code", "retryable", "status", "message"),
    [
        (
            "openai",
            {
                "error": {
                    "message": "The server had an error while processing your request. Sorry about that!",
                    "type": "server_error",
                }
            },
            "unknown",
            "unknown",
            False,
            None,
            "The server had an error while processing your request. Sorry about that! (server_error)",
        ),
        (
            "custom",
            {
                "object": "error",
                "message": "Extra inputs are not permitted",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            },
            "api_error",
            "400",
            False,
            400,
            "Extra inputs are not permitted (BadRequestError)",
        ),
        (
            "zai",
            {"code": 429, "message": "RATE_LIMIT: too many requests", "type": "rate_limit"},
            "rate_limit",
            "429",
            True,
            429,
            "RATE_LIMIT: too many requests",  # the type is already in it (any case)
        ),
        (
            "deepseek",
            {"code": 404, "message": "Model deepseek-v9 not found"},
            "model_error",
            "404_model",
            False,
            404,
            "Model deepseek-v9 not found",
        ),
        (
            "nvidia",
            {"message": "unknown model"},
            "model_error",
            "model_error",
            False,
            None,
            "unknown model",
        ),
        ("nvidia", {"code": "weird", "message": "boom"}, "unknown", "weird", False, None, "boom"),
        ("nvidia", {}, "unknown", "unknown", False, None, "NVIDIA: provider API error"),
    ],
)
def test_openai_compatible_stream_error_table(
    provider, error_obj, type_, code, retryable, status, message
):
    error = openai_compatible_stream_error(provider, error_obj)
    assert (error.type, error.code, error.retryable, error.status, error.message) == (
        type_,
        code,
        retryable,
        status,
        message,
    )


def test_openai_compatible_helpers_refuse_other_families():
    with pytest.raises(ValueError):
        openai_compatible_stream_error("google", {})


# --------------------------------------------------------------------------- Google


@pytest.mark.parametrize(
    ("text", "type_", "code", "retryable", "message"),
    [
        (
            "API key not valid",
            "api_error",
            "unknown",
            False,
            "Google API error (unknown): API key not valid",
        ),
        (
            "PERMISSION_DENIED: caller lacks access",
            "api_error",
            "unknown",
            False,
            "Google API error (unknown): PERMISSION_DENIED: caller lacks access",
        ),
        (
            "Rate-limit hit",
            "rate_limit",
            "unknown",
            True,
            "Google API error (unknown): Rate-limit hit",
        ),
        (
            "RESOURCE_EXHAUSTED",
            "rate_limit",
            "unknown",
            True,
            "Google API error (unknown): RESOURCE_EXHAUSTED",
        ),
        # the "rate" inside GenerateContent is not a rate limit
        (
            "GenerateContent stream failed",
            "api_error",
            "unknown",
            False,
            "Google API error (unknown): GenerateContent stream failed",
        ),
        (
            "DEADLINE_EXCEEDED",
            "timeout",
            "unknown",
            True,
            "Google API error (unknown): DEADLINE_EXCEEDED",
        ),
        (
            "Service UNAVAILABLE",
            "provider_overloaded",
            "unknown",
            True,
            "Google API error (unknown): Service UNAVAILABLE",
        ),
        (
            "Candidate was blocked due to safety",
            "content_blocked",
            "unknown",
            False,
            "Google API error (unknown): Candidate was blocked due to safety",
        ),
        # the heuristics are case-sensitive
        (
            "SAFETY filter",
            "api_error",
            "unknown",
            False,
            "Google API error (unknown): SAFETY filter",
        ),
        (
            'got status: 409 Conflict. {"error":{"code":409,"message":"Content blocked by safety filters","status":"ABORTED"}}',
            "content_blocked",
            "409",
            False,
            "Google API error (409): Content blocked by safety filters",
        ),
        (
            '{"error":{"code":500,"message":"{\\"error\\":{\\"code\\":429,\\"message\\":\\"Quota exceeded\\"}}"}}',
            "rate_limit",
            "429",
            True,
            "Google API error (429): Quota exceeded",
        ),
    ],
)
def test_google_provider_error_table(text, type_, code, retryable, message):
    error = google_provider_error(text)
    assert (error.type, error.code, error.retryable, error.message) == (
        type_,
        code,
        retryable,
        message,
    )


def test_google_code_falls_back_to_the_grpc_status_name():
    error = google_provider_error('{"error":{"message":"try later","status":"UNAVAILABLE"}}')
    assert (error.type, error.code, error.user_message) == (
        "provider_overloaded",
        "UNAVAILABLE",
        "try later",
    )


def test_google_mid_stream_error_chunk():
    chunk = {
        "error": {
            "code": 503,
            "message": "This model is currently experiencing high demand.",
            "status": "UNAVAILABLE",
        }
    }
    error = google_stream_error(chunk)
    assert (error.type, error.code, error.retryable, error.message) == (
        "provider_overloaded",
        "503",
        True,
        "Google API error (503): This model is currently experiencing high demand.",
    )
    assert google_stream_error(chunk["error"]) == error


def test_google_block_errors():
    assert google_block_error("PROHIBITED_CONTENT", prompt=True) == ProviderError(
        type="content_blocked",
        message="Prompt blocked by API. Reason: PROHIBITED_CONTENT",
        retryable=False,
        code="PROHIBITED_CONTENT",
    )
    assert (
        google_block_error("SAFETY", prompt=False).message
        == "Response stopped/blocked. Reason: SAFETY"
    )


# --------------------------------------------------------------------------- Anthropic


def test_anthropic_in_stream_overloaded_error_is_retryable():
    error = anthropic_stream_error(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    assert (error.type, error.code, error.retryable, error.status, error.message) == (
        "provider_overloaded",
        "overloaded_error",
        True,
        None,
        "Anthropic API error (overloaded_error): Overloaded",
    )


def test_anthropic_unknown_error_type_falls_back_to_status():
    error = normalize_http_error(
        "anthropic", 503, j({"type": "error", "error": {"type": "brand_new_error", "message": "x"}})
    )
    assert (error.type, error.retryable, error.code) == ("api_error", True, "brand_new_error")


# --------------------------------------------------------------------------- message parsing


@pytest.mark.parametrize(
    ("provider", "body", "status", "expected"),
    [
        (
            "openrouter",
            j({"error": {"message": "m", "metadata": {"raw": "raw upstream"}}}),
            502,
            "raw upstream",
        ),
        ("openrouter", j({"error": {"message": "m", "metadata": {"raw": ""}}}), 502, "m"),
        ("openrouter", j({"message": "top"}), 400, "top"),
        ("openrouter", "plain text", 400, "plain text"),
        ("openrouter", "", 502, "Bad Gateway"),
        ("openai", j({"error": {"message": "nested"}, "message": "top"}), 400, "nested"),
        ("deepseek", j({"error": "flat string"}), 400, "flat string"),
        ("nvidia", j({"detail": ["a", 1]}), 422, '["a",1]'),
        ("nvidia", j({"title": "Too Many Requests", "status": 429}), 429, "Too Many Requests"),
        ("custom", "", None, "Unknown error"),
        ("google", j([{"error": {"code": 400, "message": "bad arg"}}]), 400, "bad arg"),
        ("google", "oops", 500, "oops"),
        (
            "anthropic",
            j({"type": "error", "error": {"type": "api_error", "message": "boom"}}),
            500,
            "boom",
        ),
        ("anthropic", "", 529, ""),
    ],
)
def test_parse_error_message_per_family(provider, body, status, expected):
    assert parse_error_message(provider, body, status) == expected


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (502, 502),
        ("502", 502),
        (" 429 ", 429),
        ("server_error", None),
        (None, None),
        (True, None),
        (4.5, None),
    ],
)
def test_parse_status_code(code, expected):
    assert parse_status_code(code) == expected


# --------------------------------------------------------------------------- classifiers


@pytest.mark.parametrize(
    "message",
    [
        "Unsupported model: foo",
        "Invalid model ID",
        "unknown model 'x'",
        "Unrecognized model",
        "model `gpt-x` is not supported",
        "Model 'claude-2' not found",
        "The model gpt-4-32k is unavailable",
        "model qwen/qwen3:free invalid",
        "model not found",
        "The model does not exist",
        "This model is not available in your region",
        "No such model: llama",
        '{"code":"model_not_found"}',
        "This model has been deprecated",
    ],
)
def test_model_error_patterns_match(message):
    assert is_model_error_message(message)
    assert classify_error(message) == "model_error"


@pytest.mark.parametrize(
    "message",
    [
        "model loaded",
        "claude-sonnet-4-6 is not a valid model ID",  # the reference has no "valid model" rule
        "The model `gpt-9` does not exist or you do not have access to it.",  # id in between
        "models/gemini-pro is not found for API version v1beta",  # no space after "model"
        "undeprecated",
    ],
)
def test_model_error_patterns_do_not_match(message):
    assert not is_model_error_message(message)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (VLLM_CONTEXT, "context_length"),
        ("context length exceeded", "context_length"),
        ("Error: context_length_exceeded", "context_length"),
        ("The context window is exceeded", "context_length"),
        ("Input context length is 9000", "context_length"),
        ("Please reduce the length of the messages", "context_length"),
        ("prompt is too long: 205351 tokens > 200000 maximum", None),  # no reference rule
        (OR_402, "credit_affordability"),
        (
            "can only afford 0. To increase, visit https://openrouter.ai/settings/keys",
            "credit_affordability",
        ),
        ("Insufficient credits", "credit_affordability"),
        ("Insufficient Balance", "balance_exhausted"),
        ("Your balance is insufficient", "balance_exhausted"),
        ("Insufficient balance or no resource package. Please recharge.", "balance_exhausted"),
        ("insufficient_user_quota", "balance_exhausted"),
        (OPENAI_QUOTA, "balance_exhausted"),
        ("Billing hard limit has been reached", "balance_exhausted"),
        ("Upstream error from Minimax: insufficient balance (1008)", "balance_exhausted"),
        ("rate limited", None),
        ("", None),
    ],
)
def test_classify_error_by_message(message, expected):
    assert classify_error(message) == expected


def test_pattern_constants_are_the_single_lists():
    assert len(MODEL_ERROR_PATTERNS) == 7
    assert len(CONTEXT_LENGTH_PATTERNS) == 5
    assert len(CREDIT_AFFORDABILITY_PATTERNS) == 4
    assert len(BALANCE_EXHAUSTED_PATTERNS) == 7


def test_classify_error_order_model_before_balance_before_credit_before_context():
    assert (
        classify_error("unsupported model; insufficient balance; maximum context length")
        == "model_error"
    )
    assert classify_error("insufficient balance and requires more credits") == "balance_exhausted"
    assert (
        classify_error("can only afford 10; maximum context length is 8192")
        == "credit_affordability"
    )


def test_credit_classifiers_are_mutually_exclusive():
    both = "Insufficient balance: this request requires more credits"
    assert is_account_balance_exhausted_error(both)
    assert not is_credit_affordability_error(both)
    assert is_credit_affordability_error(OR_402)
    assert not is_account_balance_exhausted_error(OR_402)


def test_classify_error_trusts_the_model_error_type():
    error = ProviderError(type="model_error", message="HTTP 400", retryable=False)
    assert classify_error(error) == "model_error"


def test_classify_error_reads_original_error_body_and_user_message():
    from_body = ProviderError(
        type="api_error",
        message="HTTP 400",
        retryable=False,
        original_error={"body": j({"error": {"message": "context_length_exceeded"}})},
    )
    assert classify_error(from_body) == "context_length"
    from_user = ProviderError(
        type="api_error", message="x", retryable=False, user_message="Please recharge"
    )
    assert classify_error(from_user) == "balance_exhausted"
    from_exc = ProviderError(
        type="unknown", message="x", retryable=False, original_error=RuntimeError("no such model")
    )
    assert classify_error(from_exc) == "model_error"
    from_detail = ProviderError(
        type="api_error",
        message="x",
        retryable=False,
        original_error={"detail": "Insufficient credits"},
    )
    assert classify_error(from_detail) == "credit_affordability"


def test_classify_error_on_normalized_http_errors():
    assert (
        classify_error(
            normalize_http_error("openrouter", 402, j({"error": {"message": OR_402, "code": 402}}))
        )
        == "credit_affordability"
    )
    assert (
        classify_error(
            normalize_http_error("deepseek", 402, j({"error": {"message": "Insufficient Balance"}}))
        )
        == "balance_exhausted"
    )
    assert (
        classify_error(
            normalize_http_error("custom", 400, j({"object": "error", "message": VLLM_CONTEXT}))
        )
        == "context_length"
    )
    # Gemini's free-tier quota 429 stays a retryable rate_limit but reads as exhausted balance
    gemini = normalize_http_error(
        "google", 429, j({"error": {"code": 429, "message": GEMINI_QUOTA}})
    )
    assert (gemini.type, gemini.retryable, classify_error(gemini)) == (
        "rate_limit",
        True,
        "balance_exhausted",
    )


def test_collect_error_messages_trims_collapses_and_dedups():
    error = ProviderError(
        type="api_error",
        message="  Insufficient\n   Balance ",
        retryable=False,
        user_message="Insufficient Balance",
        original_error={"message": ""},
    )
    assert collect_error_messages(error) == ["Insufficient Balance"]
    assert provider_error_detail(error) == "Insufficient Balance"
    assert provider_error_detail("   ") == ""


@pytest.mark.parametrize(
    ("provider", "exc", "expected"),
    [
        # "connection refused" -> api_error ECONNREFUSED, not retryable
        ("openai", "refused", ("api_error", "ECONNREFUSED", False)),
        ("deepseek", "refused", ("api_error", "ECONNREFUSED", False)),
        # a message with "timeout" (ReadTimeout: ...) -> timeout, retryable
        ("openai", "timeout", ("timeout", "unknown", True)),
        # the outer catch -> the error handler: no code -> "unknown", not retryable
        ("openrouter", "refused", ("unknown", "unknown", False)),
        ("openrouter", "timeout", ("unknown", "unknown", False)),
        # Gemini: no code, no heuristic -> api_error, not retryable
        ("google", "refused", ("api_error", "unknown", False)),
        # no reference adapter: the lab's own mapping
        ("anthropic", "refused", ("api_error", "network_error", True)),
    ],
)
def test_a_connection_failure_goes_through_the_familys_error_mapping(provider, exc, expected):
    import httpx

    from lab.stream import run_stream

    errors = {
        "refused": httpx.ConnectError("[Errno 111] Connection refused"),
        "timeout": httpx.ReadTimeout("The read operation timed out"),
    }

    def fail(request):
        raise errors[exc]

    body = {"model": "m", "messages": [], "contents": [], "max_tokens": 8}
    result = run_stream(provider, body, transport=httpx.MockTransport(fail), base_url="http://x/v1")
    assert (result.error.type, result.error.code, result.error.retryable) == expected
    if provider == "openrouter" and exc == "timeout":
        assert result.error.message == (
            "OpenRouter API error (unknown): OpenRouter stream timed out while waiting for data"
        )
