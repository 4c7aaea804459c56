"""Provider error normalization and the message classifiers.

Pure functions, no I/O. Two jobs:

1. **Normalize** a provider failure into :class:`lab.model.ProviderError`. The stream adapters
   call the per-family building blocks below, so each rule has one definition;
   :func:`normalize_http_error` is the entry point for a non-OK HTTP response. It, and the
   other entry points that take a provider name (``parse_error_message``,
   ``provider_families``), read the provider registry, so they are defined in
   :mod:`lab.providers.dispatch` and importable from here: this module imports no provider.
2. **Classify** a normalized error by its text (:func:`classify_error`) to pick the advice:
   model selection, top-up, fewer output tokens, shorter context.

Families and their building blocks (each defined in its ``lab.providers`` module and still
importable from here)::

    provider                 family              HTTP body -> ProviderError
    openrouter               OpenRouter          parse_error_message -> openrouter_provider_error
    openai deepseek zai      OpenAI-compatible   "HTTP <status>: <parsed>" ->
      nvidia custom                                openai_compatible_provider_error
    google                   Google              google_provider_error(body text, code=status)
    anthropic                Anthropic           anthropic_error(parsed body, status=status)

    mid-stream (SSE) error objects:
      openrouter_stream_error(error_obj)                      (processChunk, error branch)
      is_openrouter_malformed_tool_call_error(error_obj)      (adapter checks its accumulator)
      openai_compatible_stream_error(provider, error_obj)
      google_stream_error(error_obj), google_block_error(reason, prompt=...)
      anthropic_stream_error(error_obj)

    openrouter_http_failure_message(status, body_text, request_body, attempt_label)
                                   (the adapter's terminal "HTTP <status>: ... | request_attempt")
    tables: openrouter_error_type(code, message) -> (type, retryable)      mapErrorCodeToType
            classify_openai_compatible_status(status, message) -> StatusClassification
    parse_error_message(provider, body_text, status=None) -> str  (message extraction)
    parse_status_code(code) -> int | None  ("502" counts, "server_error" does not)

**OpenRouter** (``openrouter_error_type``, substring match on the code string or message, the
first row wins; 500 has no row, so it is ``unknown`` and not retryable, as in the reference)::

    "400" "401" "402" "413" "404"  -> api_error            no retry
    "408"                          -> timeout              retry
    "429"                          -> rate_limit           retry
    "502" "503"                    -> provider_overloaded  retry
    message has "timeout"          -> timeout              retry
    message has "content"          -> content_blocked      no retry
    otherwise                      -> unknown              no retry

    a message naming the data-policy / privacy settings -> api_error "OpenRouter Privacy
    Policy Error: ..." (checked first); otherwise "OpenRouter API error (<code>): <message>"

**OpenAI-compatible** (``classify_openai_compatible_status``; code = the status string)::

    None                -> unknown, "unknown"
    400 401 403 404     -> api_error            no retry
    429 + balance words -> api_error "429_balance"      no retry   (Z.ai 1113, ...)
    429 + plan words    -> api_error "429_plan_access"  no retry
    429                 -> rate_limit           retry
    408 504             -> timeout              retry
    500 502 503         -> provider_overloaded  retry
    other               -> api_error            no retry

    then (openai_compatible_provider_error): model-error text -> model_error "<status>_model";
    "econnrefused"/"connection refused" -> api_error "ECONNREFUSED"; "timeout" -> timeout,
    retry; message "<Prefix>: HTTP <status>: <parsed message>".

**Google** (``google_provider_error``): 400/401/403/404 api_error, 429 rate_limit (retry),
**500 api_error retryable**, 503 provider_overloaded, 504 timeout; any other code falls to
case-sensitive text heuristics: API key / PERMISSION_DENIED / UNAUTHENTICATED -> api_error;
rate limit / quota / RESOURCE_EXHAUSTED -> rate_limit; timeout / DEADLINE_EXCEEDED -> timeout;
overloaded / UNAVAILABLE -> provider_overloaded; safety / blocked / prohibited ->
content_blocked; otherwise api_error.

**Anthropic** (``anthropic_error``; no reference adapter exists, so this table is the lab's):
HTTP 529 or ``overloaded_error`` -> provider_overloaded (retry); ``rate_limit_error`` ->
rate_limit (retry; billing words re-code it to api_error "429_balance", as on the Z.ai
Anthropic route); ``api_error`` -> api_error (retry); ``timeout_error`` -> timeout (retry);
the request/auth/permission/not-found/size/billing errors -> api_error (no retry); a
``not_found_error`` about a model, or model-error text, -> model_error.

**Classifiers** (:func:`classify_error`, first match wins; the order is the advice order)::

    model_error           type is model_error, or MODEL_ERROR_PATTERNS match
    balance_exhausted     BALANCE_EXHAUSTED_PATTERNS   (top up: nothing fits)
    credit_affordability  CREDIT_AFFORDABILITY_PATTERNS, only if not balance_exhausted
                          (fewer max_tokens would fit)
    context_length        CONTEXT_LENGTH_PATTERNS
    None

The texts matched are the error's ``message``, one message dug out of ``original_error``,
and ``user_message``: trimmed, deduplicated, whitespace collapsed; every pattern is
case-insensitive and word-bounded.

Lab choices where the reference is silent, or goes further than it:

* the OpenAI-compatible message parser also takes a string ``error`` and an RFC-7807
  ``title`` (NVIDIA problem JSON) before falling back to the raw text;
* behind ``LabConfig.body_error_codes`` (off by default: the reference reads the message
  only), the OpenAI-compatible model-error check also runs on the body's ``error.code``
  (OpenAI's 404 ``model_not_found``, whose message alone matches no pattern), and Z.ai
  business codes under HTTP 429 re-code as billing even when the text is not English
  (each endpoint adapter's ``error_options()``); :func:`classify_error` stays text-only, so a
  Chinese-only 1113 message is then ``429_balance`` but classifies as None;
* an OpenRouter ``metadata.raw`` that is an object is used as compact JSON;
* :func:`normalize_http_error` has no request context, so its OpenRouter message is
  "OpenRouter API error (<status>): <message>"; an adapter that wants the reference's
  "HTTP ... | request_attempt: ..." text builds it with
  :func:`openrouter_http_failure_message` and passes it to :func:`openrouter_provider_error`;
* messages are "<prefix>: HTTP <status>: ..." with prefixes OpenAI, DeepSeek, Z.ai, NVIDIA,
  Custom (the reference leaves ``errorMessagePrefix`` to each adapter);
* Google and Anthropic messages end with the extracted provider message, not the SDK text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import Any, Literal

from lab.model import ErrorType, ProviderError

__all__ = [
    "BALANCE_EXHAUSTED_PATTERNS",
    "CONTEXT_LENGTH_PATTERNS",
    "CREDIT_AFFORDABILITY_PATTERNS",
    "MODEL_ERROR_PATTERNS",
    "provider_families",  # noqa: F822 - served by __getattr__ (lab.providers.dispatch)
    "ErrorClass",
    "classify_error",
    "code_string",
    "collect_error_messages",
    "compact_json",
    "dig",
    "first_text",
    "inner_error",
    "is_account_balance_exhausted_error",
    "is_context_length_error",
    "is_credit_affordability_error",
    "is_model_error_message",
    "is_provider_model_error",
    "normalize_http_error",  # noqa: F822 - served by __getattr__ (lab.providers.dispatch)
    "parse_error_message",  # noqa: F822 - served by __getattr__ (lab.providers.dispatch)
    "parse_error_message_for_family",
    "normalize_http_error_for_family",
    "parse_error_body",
    "parse_status_code",
    "provider_error_detail",
    "status_phrase",
]

ErrorClass = Literal["model_error", "balance_exhausted", "credit_affordability", "context_length"]

# --------------------------------------------------------------------------- patterns


def _patterns(*sources: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(rf"\b{s}\b", re.IGNORECASE) for s in sources)


MODEL_ID_CHARS = r"[`\"'A-Za-z0-9_.:/-]{1,160}"
"""A model id as the model-error pattern sees it: 1-160 quote/word/``. : / -`` characters."""

MODEL_ERROR_PATTERNS: tuple[re.Pattern[str], ...] = _patterns(
    r"unsupported model",
    r"(?:invalid|unknown|unrecognized) model",
    rf"model {MODEL_ID_CHARS} (?:is )?(?:not supported|unsupported|not found|unavailable|invalid)",
    r"model (?:not found|does not exist|is not available)",
    r"no such model",
    r"model_not_found",
    r"deprecated",
)
CONTEXT_LENGTH_PATTERNS: tuple[re.Pattern[str], ...] = _patterns(
    r"maximum context length",
    r"context length (?:is|of|exceeded)",
    r"context_length_exceeded",
    r"context window (?:is )?exceeded",
    r"reduce the length of",
)
CREDIT_AFFORDABILITY_PATTERNS: tuple[re.Pattern[str], ...] = _patterns(
    r"requires more credits",
    r"can only afford",
    r"fewer max_tokens",
    r"insufficient credits",
)
BALANCE_EXHAUSTED_PATTERNS: tuple[re.Pattern[str], ...] = _patterns(
    r"insufficient balance",
    r"balance is insufficient",
    r"no resource package",
    r"please recharge",
    r"insufficient_user_quota",
    r"exceeded your current quota",
    r"billing hard limit has been reached",
)

# --------------------------------------------------------------------------- constants


_MOVED: dict[str, str] = {
    **dict.fromkeys(
        (
            "OPENROUTER_CODE_TYPE_TABLE",
            "OPENROUTER_MESSAGE_TYPE_TABLE",
            "OPENROUTER_PRIVACY_MARKERS",
            "OPENROUTER_PRIVACY_MESSAGE",
            "OPENROUTER_DEFAULT_MESSAGE",
            "OPENROUTER_RAW_RESPONSE_MAX_CHARS",
            "OPENROUTER_DEFAULT_MODEL_LABEL",
            "OPENROUTER_MALFORMED_TOOL_CALL_CODE",
            "OPENROUTER_MALFORMED_TOOL_CALL_MARKERS",
            "openrouter_error_type",
            "is_openrouter_privacy_error",
            "openrouter_provider_error",
            "openrouter_http_failure_message",
            "is_provider_error_shape",
            "openrouter_stream_error",
            "is_openrouter_malformed_tool_call_error",
        ),
        "lab.providers.openrouter",
    ),
    **dict.fromkeys(
        (
            "CONNECTION_REFUSED_PHRASES",
            "CODE_CONNECTION_REFUSED",
            "HTTP_STATUS_IN_MESSAGE",
            "OpenAICompatibleErrorOptions",
            "OPENAI_COMPATIBLE_STREAM_DEFAULT_MESSAGE",
            "StatusClassification",
            "classify_openai_compatible_status",
            "openai_compatible_provider_error",
            "openai_compatible_stream_error",
        ),
        "lab.providers.chat_errors",
    ),
    **dict.fromkeys(
        (
            "GOOGLE_CODE_TYPE_TABLE",
            "GOOGLE_RATE_LIMIT_PATTERN",
            "GOOGLE_MESSAGE_HEURISTICS",
            "GOOGLE_ERROR_JSON_MARKER",
            "GOOGLE_UNBLOCKED_REASON",
            "GOOGLE_BLOCKING_FINISH_REASONS",
            "google_provider_error",
            "google_stream_error",
            "google_block_error",
        ),
        "lab.providers.google",
    ),
    **dict.fromkeys(
        (
            "ANTHROPIC_ERROR_TYPES",
            "ANTHROPIC_OVERLOADED_STATUS",
            "ANTHROPIC_NOT_FOUND_MODEL_PREFIX",
            "anthropic_error",
            "anthropic_stream_error",
        ),
        "lab.providers.anthropic",
    ),
}
"""Names whose one definition now lives in their provider's module (issue 18); still
importable from here, resolved at first use so the arrows stay providers -> errors."""


_BY_PROVIDER: tuple[str, ...] = ("normalize_http_error", "parse_error_message", "provider_families")
"""The entry points that take a provider name: they read the registry, so they are defined
in :mod:`lab.providers.dispatch` (this core module imports no provider) and still importable
from here."""


def __getattr__(name: str) -> Any:
    if name == "PROVIDERS":  # provider -> family, derived from the one registry
        import importlib

        return importlib.import_module("lab.providers.dispatch").provider_families()
    module = "lab.providers.dispatch" if name in _BY_PROVIDER else _MOVED.get(name)
    if module is not None:
        import importlib

        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


UNKNOWN_ERROR_MESSAGE = "Unknown error"

OPENAI_API_ERROR_STATUSES: frozenset[int] = frozenset({400, 401, 403, 404})
OPENAI_TIMEOUT_STATUSES: frozenset[int] = frozenset({408, 504})
OPENAI_OVERLOADED_STATUSES: frozenset[int] = frozenset({500, 502, 503})
"""The OpenAI-style status groups (``classifyOpenAICompatibleStatus``; Anthropic's timeouts)."""
RATE_LIMIT_BALANCE_PHRASES: tuple[str, ...] = (
    "insufficient balance",
    "insufficient credits",
    "not enough credits",
    "no resource package",
    "please recharge",
)
RATE_LIMIT_PLAN_ACCESS_PHRASES: tuple[str, ...] = (
    "subscription plan",
    "does not yet include access",
    "plan does not include",
)
CODE_429_BALANCE = "429_balance"
CODE_429_PLAN_ACCESS = "429_plan_access"

# --------------------------------------------------------------------------- small helpers


def parse_status_code(code: Any) -> int | None:
    """An HTTP-like status from an error ``code``: an int, or a string of digits ("502")."""
    if isinstance(code, bool):
        return None
    if isinstance(code, int):
        return code
    if isinstance(code, float) and code.is_integer():  # a JSON number: 502.0 is 502
        return int(code)
    if isinstance(code, str):
        digits = code.strip()
        # ASCII digits only ("²".isdigit() is True, int("²") fails), and no longer than any
        # status (int() refuses a string of more than 4,300 digits)
        if digits.isascii() and digits.isdigit() and len(digits) <= 9:
            return int(digits)
    return None


def status_phrase(status: int | None) -> str:
    """The HTTP reason phrase of **status** (``429`` -> ``"Too Many Requests"``), "" if none."""
    try:
        return HTTPStatus(status).phrase if status is not None else ""
    except ValueError:
        return ""


def parse_error_body(text: str | None) -> Any:
    """An HTTP error body parsed as JSON (the first element of a Gemini ``alt=json``
    array); None when it is empty or not JSON. Error bodies are small and off the hot path,
    so the standard parser reads them."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except (ValueError, TypeError):
        return None
    if isinstance(value, list) and value and isinstance(value[0], Mapping):
        return value[0]  # Gemini alt=json wraps the error in an array
    return value


def dig(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]...`` through mappings only; None where a step is missing or
    not a mapping (``dig(body, "error", "message")``)."""
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def first_text(*candidates: Any) -> str:
    """The first candidate that is a string with something besides whitespace; "" if none."""
    for value in candidates:
        if isinstance(value, str) and value.strip():
            return value
    return ""


def compact_json(value: Any) -> str:
    """**value** as compact JSON text (no spaces, non-ASCII kept), as a message quotes it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def code_string(code: Any) -> str | None:
    """An error ``code`` as text (``502`` -> ``"502"``); None for a bool, None, an empty or
    a non-scalar code."""
    if isinstance(code, bool) or code is None:
        return None
    if isinstance(code, int | float | str) and str(code).strip():
        return str(code)
    return None


def inner_error(error_obj: Any) -> Any:
    """The ``error`` object inside **error_obj** when it holds one (``{"error": {...}}``),
    else **error_obj** itself."""
    inner = dig(error_obj, "error")
    return inner if isinstance(inner, Mapping) else error_obj


# --------------------------------------------------------------------------- messages


def parse_error_message_for_family(family: str, body_text: str, status: int | None = None) -> str:
    """The message rule of a family with no ``error_message`` hook of its own:
    ``error.message``, ``message``, the raw text, the status phrase (every registered
    family defines its own, in its module)."""
    parsed = parse_error_body(body_text)
    raw = body_text if isinstance(body_text, str) else ""
    return first_text(
        dig(parsed, "error", "message"), dig(parsed, "message"), raw, status_phrase(status)
    )


# --------------------------------------------------------------------------- the default HTTP rule


def normalize_http_error_for_family(
    provider: str, family: str, status: int, body_text: str, *, body_error_codes: bool = False
) -> ProviderError:
    """The HTTP error rule of a family with no ``normalize_http_error`` hook of its own
    (every registered family defines its own, in its module): the type by status (429
    rate_limit, 408/504 timeout, 5xx api_error, all retryable; other codes api_error),
    "<provider> API error (<status>): <message>"."""
    message = parse_error_message_for_family(family, body_text, status) or UNKNOWN_ERROR_MESSAGE
    error_type: ErrorType
    if status == 429:
        error_type, retryable = "rate_limit", True
    elif status in OPENAI_TIMEOUT_STATUSES:
        error_type, retryable = "timeout", True
    else:
        error_type, retryable = "api_error", status >= 500
    return ProviderError(
        type=error_type,
        message=f"{provider} API error ({status}): {message}",
        retryable=retryable,
        code=str(status),
        status=status,
        user_message=message,
        original_error={"provider": provider, "status": status, "body": body_text},
    )


# --------------------------------------------------------------------------- classifiers


def _original_error_message(original: Any) -> str:
    if isinstance(original, ProviderError):
        return original.message
    if isinstance(original, BaseException):
        return str(original)
    if isinstance(original, str):
        return original
    if not isinstance(original, Mapping):
        return ""
    found = first_text(
        original.get("message"),
        original.get("detail"),
        dig(original, "error", "message"),
        dig(original, "error", "detail"),
    )
    if found:
        return found
    body = original.get("body")
    parsed = parse_error_body(body) if isinstance(body, str) else body
    if isinstance(parsed, Mapping):
        found = first_text(
            dig(parsed, "error", "message"),
            dig(parsed, "error", "detail"),
            parsed.get("message"),
            parsed.get("detail"),
        )
        if found:
            return found
    return body if isinstance(body, str) else ""


def collect_error_messages(error: ProviderError | str) -> list[str]:
    """The texts the classifiers match: ``message``, one message out of ``original_error``,
    ``user_message``; trimmed, whitespace collapsed, empty and repeated entries dropped."""
    if isinstance(error, str):
        candidates: list[Any] = [error]
    else:
        candidates = [
            error.message,
            _original_error_message(error.original_error),
            error.user_message,
        ]
    result: list[str] = []
    for value in candidates:
        if not isinstance(value, str):
            continue
        text = " ".join(value.split())
        if text and text not in result:
            result.append(text)
    return result


def provider_error_detail(error: ProviderError | str) -> str:
    """The first collected message (``getProviderErrorDetail``), "" when there is none."""
    messages = collect_error_messages(error)
    return messages[0] if messages else ""


def _matches(error: ProviderError | str, patterns: Iterable[re.Pattern[str]]) -> bool:
    pats = tuple(patterns)
    return any(p.search(text) for text in collect_error_messages(error) for p in pats)


def is_model_error_message(message: str | None) -> bool:
    """Does this text say the model id is unsupported, unknown, missing or deprecated?"""
    text = " ".join((message or "").split())
    return any(p.search(text) for p in MODEL_ERROR_PATTERNS)


def is_provider_model_error(error: ProviderError | str) -> bool:
    if isinstance(error, ProviderError) and error.type == "model_error":
        return True
    return _matches(error, MODEL_ERROR_PATTERNS)


def is_account_balance_exhausted_error(error: ProviderError | str) -> bool:
    """Nothing spendable is left: no request of any size can succeed."""
    return _matches(error, BALANCE_EXHAUSTED_PATTERNS)


def is_credit_affordability_error(error: ProviderError | str) -> bool:
    """A smaller ``max_tokens`` would fit the remaining credit. Never true together with
    :func:`is_account_balance_exhausted_error` (that one is the stricter condition)."""
    return _matches(error, CREDIT_AFFORDABILITY_PATTERNS) and not (
        is_account_balance_exhausted_error(error)
    )


def is_context_length_error(error: ProviderError | str) -> bool:
    return _matches(error, CONTEXT_LENGTH_PATTERNS)


def classify_error(error: ProviderError | str) -> ErrorClass | None:
    """Which advice applies: the first of model_error, balance_exhausted,
    credit_affordability, context_length that matches, or None.

    >>> classify_error("This request requires more credits, or fewer max_tokens.")
    'credit_affordability'
    """
    if is_provider_model_error(error):
        return "model_error"
    if is_account_balance_exhausted_error(error):
        return "balance_exhausted"
    if is_credit_affordability_error(error):
        return "credit_affordability"
    if is_context_length_error(error):
        return "context_length"
    return None
