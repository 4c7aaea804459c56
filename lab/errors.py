"""Provider error normalization and the message classifiers.

Pure functions, no I/O. Two jobs:

1. **Normalize** a provider failure into :class:`lab.model.ProviderError`. The stream adapters
   call the per-family building blocks below, so each rule has one definition;
   :func:`normalize_http_error` is the entry point for a non-OK HTTP response.
2. **Classify** a normalized error by its text (:func:`classify_error`) to pick the advice:
   model selection, top-up, fewer output tokens, shorter context.

Families and their building blocks::

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
    "ANTHROPIC_ERROR_TYPES",
    "BALANCE_EXHAUSTED_PATTERNS",
    "CONTEXT_LENGTH_PATTERNS",
    "CREDIT_AFFORDABILITY_PATTERNS",
    "GOOGLE_BLOCKING_FINISH_REASONS",
    "MODEL_ERROR_PATTERNS",
    "provider_families",
    "ErrorClass",
    "anthropic_error",
    "anthropic_stream_error",
    "classify_error",
    "collect_error_messages",
    "google_block_error",
    "google_provider_error",
    "google_stream_error",
    "is_account_balance_exhausted_error",
    "is_context_length_error",
    "is_credit_affordability_error",
    "is_model_error_message",
    "is_provider_model_error",
    "normalize_http_error",
    "parse_error_message",
    "parse_error_message_for_family",
    "normalize_http_error_for_family",
    "parse_status_code",
    "provider_error_detail",
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
        "lab.providers.openai_compat",
    ),
}
"""Names whose one definition now lives in their provider's module (issue 18); still
importable from here, resolved at first use so the arrows stay providers -> errors."""


def __getattr__(name: str) -> Any:
    if name == "PROVIDERS":  # derived from the one registry, lab.providers.PROVIDERS
        return provider_families()
    module = _MOVED.get(name)
    if module is not None:
        import importlib

        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def provider_families() -> dict[str, str]:
    """Provider name -> error family, read from each registered adapter's ``family``."""
    from lab.providers import PROVIDERS, get_adapter

    return {name: get_adapter(name).family for name in PROVIDERS}


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

GOOGLE_CODE_TYPE_TABLE: dict[int, tuple[ErrorType, bool]] = {
    400: ("api_error", False),
    401: ("api_error", False),
    403: ("api_error", False),
    404: ("api_error", False),
    429: ("rate_limit", True),
    500: ("api_error", True),
    503: ("provider_overloaded", True),
    504: ("timeout", True),
}
GOOGLE_RATE_LIMIT_PATTERN = re.compile(r"\brate[- ]?limit|\bquota\b", re.IGNORECASE)
GOOGLE_MESSAGE_HEURISTICS: tuple[tuple[tuple[str, ...], ErrorType, bool], ...] = (
    (("API key", "PERMISSION_DENIED", "UNAUTHENTICATED"), "api_error", False),
    (("RESOURCE_EXHAUSTED",), "rate_limit", True),  # with GOOGLE_RATE_LIMIT_PATTERN
    (("timeout", "DEADLINE_EXCEEDED"), "timeout", True),
    (("overloaded", "UNAVAILABLE"), "provider_overloaded", True),
    (("safety", "blocked", "prohibited"), "content_blocked", False),
)
"""Case-sensitive substrings for a code outside GOOGLE_CODE_TYPE_TABLE, in order."""
GOOGLE_ERROR_JSON_MARKER = re.compile(r'\{\s*"error"\s*:')
"""Parse only texts holding ``{"error":`` (whitespace allowed: HTTP bodies are pretty-printed)."""
GOOGLE_UNBLOCKED_REASON = "BLOCKED_REASON_UNSPECIFIED"
GOOGLE_BLOCKING_FINISH_REASONS: frozenset[str] = frozenset(
    {"SAFETY", "OTHER", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}
)

ANTHROPIC_ERROR_TYPES: dict[str, tuple[ErrorType, bool]] = {
    "invalid_request_error": ("api_error", False),
    "authentication_error": ("api_error", False),
    "permission_error": ("api_error", False),
    "not_found_error": ("api_error", False),
    "request_too_large": ("api_error", False),
    "billing_error": ("api_error", False),
    "rate_limit_error": ("rate_limit", True),
    "api_error": ("api_error", True),
    "timeout_error": ("timeout", True),
    "overloaded_error": ("provider_overloaded", True),
}
ANTHROPIC_OVERLOADED_STATUS = 529
ANTHROPIC_NOT_FOUND_MODEL_PREFIX = "model:"

# --------------------------------------------------------------------------- small helpers


def parse_status_code(code: Any) -> int | None:
    """An HTTP-like status from an error ``code``: an int, or a string of digits ("502")."""
    if isinstance(code, bool):
        return None
    if isinstance(code, int):
        return code
    if isinstance(code, float) and code.is_integer():  # a JSON number: 502.0 is 502
        return int(code)
    if isinstance(code, str) and code.strip().isdigit():
        return int(code.strip())
    return None


def _status_phrase(status: int | None) -> str:
    try:
        return HTTPStatus(status).phrase if status is not None else ""
    except ValueError:
        return ""


def _parse_json(text: str | None) -> Any:
    if not text:
        return None
    try:
        value = json.loads(text)
    except (ValueError, TypeError):
        return None
    if isinstance(value, list) and value and isinstance(value[0], Mapping):
        return value[0]  # Gemini alt=json wraps the error in an array
    return value


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _first_text(*candidates: Any) -> str:
    for value in candidates:
        if isinstance(value, str) and value.strip():
            return value
    return ""


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _code_string(code: Any) -> str | None:
    if isinstance(code, bool) or code is None:
        return None
    if isinstance(code, int | float | str) and str(code).strip():
        return str(code)
    return None


def _inner_error(error_obj: Any) -> Any:
    inner = _get(error_obj, "error")
    return inner if isinstance(inner, Mapping) else error_obj


# --------------------------------------------------------------------------- messages


def parse_error_message(provider: str, body_text: str, status: int | None = None) -> str:
    """The provider's own message in an HTTP error body, by its adapter's
    ``error_message`` (each family's rules live in its module):

    * openrouter: ``error.metadata.raw`` (an object as compact JSON), ``error.message``,
      ``message``, the raw text, the status phrase.
    * OpenAI-compatible: ``error.message``, a string ``error``, ``message``, ``detail`` (a
      non-string as JSON), ``title`` (problem JSON), the raw text, the status phrase,
      "Unknown error".
    * google: the (possibly JSON-in-JSON) ``error.message``, else the raw text.
    * anthropic: ``error.message``, ``message``, the raw text, the status phrase.
    """
    return _adapter(provider).error_message(body_text, status)


def parse_error_message_for_family(family: str, body_text: str, status: int | None = None) -> str:
    """The Google and Anthropic rules of :func:`parse_error_message` (the default hook)."""
    parsed = _parse_json(body_text)
    raw = body_text if isinstance(body_text, str) else ""
    phrase = _status_phrase(status)
    if family == "google":
        _, message, _ = _parse_google_error(raw)
        return _first_text(message, raw, phrase)
    return _first_text(_get(parsed, "error", "message"), _get(parsed, "message"), raw, phrase)


def _adapter(provider: str) -> Any:
    """The registered adapter class of ``provider`` (looked up at call time, so the arrows
    stay providers -> errors); ValueError naming the known providers otherwise."""
    from lab.providers import PROVIDERS, get_adapter

    if provider not in PROVIDERS:
        known = ", ".join(PROVIDERS)
        raise ValueError(f"unknown provider {provider!r}; expected one of: {known}")
    return get_adapter(provider)


def _family(provider: str) -> str:
    return _adapter(provider).family


# --------------------------------------------------------------------------- Google


def _parse_google_error(text: str) -> tuple[Any, str | None, Any]:
    """(code, extracted message, status name) from an error text holding ``{"error":``."""
    if not GOOGLE_ERROR_JSON_MARKER.search(text):
        return None, None, None
    span = re.search(r"\{.*\}", text, re.DOTALL)  # greedy: first "{" to last "}"
    parsed = _parse_json(span.group(0)) if span else None
    if not isinstance(parsed, Mapping):
        return None, None, None
    inner = parsed.get("error")
    api_error: Mapping = inner if isinstance(inner, Mapping) else parsed
    code = api_error.get("code")
    extracted: str | None = None
    message = api_error.get("message")
    if isinstance(message, str):
        nested = _parse_json(message)
        if isinstance(nested, Mapping) and isinstance(_get(nested, "error", "message"), str):
            extracted = nested["error"]["message"]
            if _get(nested, "error", "code") is not None:
                code = nested["error"]["code"]
        else:
            extracted = message
    return code, extracted, api_error.get("status")


def google_provider_error(
    error_text: str, *, code: Any = None, original_error: Any = None
) -> ProviderError:
    """Google ``handleProviderError`` over an error's text (an SDK message or HTTP body).

    A ``{"error": ...}`` object in the text gives the code (overriding ``code``), the
    status name and the extracted message (JSON-in-JSON unwrapped). The code picks the
    type from the table; any other code falls to the case-sensitive text heuristics over
    the whole text. message = "Google API error (<code>): <extracted message or text>".
    """
    parsed_code, extracted, status_name = _parse_google_error(error_text)
    if parsed_code is not None:
        code = parsed_code
    numeric = parse_status_code(code)
    if numeric is not None and numeric in GOOGLE_CODE_TYPE_TABLE:
        error_type, retryable = GOOGLE_CODE_TYPE_TABLE[numeric]
    else:
        error_type, retryable = _google_heuristics(error_text)
    code_text = _code_string(code) or _first_text(status_name) or "unknown"
    shown_code = _code_string(code) or "unknown"
    return ProviderError(
        type=error_type,
        message=f"Google API error ({shown_code}): {extracted or error_text}",
        retryable=retryable,
        code=code_text,
        status=numeric,
        user_message=extracted,
        original_error=original_error,
    )


def _google_heuristics(text: str) -> tuple[ErrorType, bool]:
    for needles, error_type, retryable in GOOGLE_MESSAGE_HEURISTICS:
        # the rate-limit row also takes the case-insensitive GOOGLE_RATE_LIMIT_PATTERN
        if error_type == "rate_limit" and GOOGLE_RATE_LIMIT_PATTERN.search(text):
            return error_type, retryable
        if any(n in text for n in needles):
            return error_type, retryable
    return "api_error", False


def google_stream_error(error_obj: Mapping[str, Any]) -> ProviderError:
    """A mid-stream ``{"error": {code, message, status}}`` chunk (or its inner object)."""
    chunk = error_obj if isinstance(error_obj.get("error"), Mapping) else {"error": error_obj}
    return google_provider_error(_compact(chunk), original_error=dict(chunk["error"]))


def google_block_error(reason: str, *, prompt: bool, original_error: Any = None) -> ProviderError:
    """``content_blocked`` for a ``promptFeedback.blockReason`` (``prompt=True``) or a
    blocking candidate ``finishReason`` (see :data:`GOOGLE_BLOCKING_FINISH_REASONS`)."""
    template = (
        "Prompt blocked by API. Reason: {r}" if prompt else "Response stopped/blocked. Reason: {r}"
    )
    return ProviderError(
        type="content_blocked",
        message=template.format(r=reason),
        retryable=False,
        code=reason,
        original_error=original_error,
    )


# --------------------------------------------------------------------------- Anthropic


def anthropic_error(
    error_obj: Mapping[str, Any] | None, *, status: int | None = None
) -> ProviderError:
    """An Anthropic ``{"type":"error","error":{"type","message"}}`` (or its inner object),
    from an HTTP body (with ``status``) or an ``event: error`` frame."""
    err = _inner_error(error_obj or {})
    kind = err.get("type") if isinstance(err.get("type"), str) else None
    message = _first_text(err.get("message")) or _status_phrase(status) or UNKNOWN_ERROR_MESSAGE
    if status == ANTHROPIC_OVERLOADED_STATUS:
        error_type, retryable = "provider_overloaded", True
    elif kind in ANTHROPIC_ERROR_TYPES:
        error_type, retryable = ANTHROPIC_ERROR_TYPES[kind]
    else:
        error_type, retryable = _anthropic_status_type(status)
    code = kind or _code_string(err.get("code")) or (str(status) if status else "unknown")
    lowered = message.lower()
    if error_type == "rate_limit" and any(p in lowered for p in RATE_LIMIT_BALANCE_PHRASES):
        error_type, code, retryable = "api_error", CODE_429_BALANCE, False
    if is_model_error_message(message) or (
        kind == "not_found_error" and lowered.startswith(ANTHROPIC_NOT_FOUND_MODEL_PREFIX)
    ):
        error_type, retryable = "model_error", False
        code = f"{status}_model" if status is not None else "model_error"
    return ProviderError(
        type=error_type,
        message=f"Anthropic API error ({kind or status or 'unknown'}): {message}",
        retryable=retryable,
        code=code,
        status=status,
        user_message=message,
        original_error=dict(error_obj) if isinstance(error_obj, Mapping) else error_obj,
    )


def _anthropic_status_type(status: int | None) -> tuple[ErrorType, bool]:
    if status is None:
        return "unknown", False
    if status == 429:
        return "rate_limit", True
    if status in OPENAI_TIMEOUT_STATUSES:
        return "timeout", True
    if status >= 500:
        return "api_error", True
    return "api_error", False


def anthropic_stream_error(error_obj: Mapping[str, Any]) -> ProviderError:
    """An ``event: error`` payload, e.g. ``{"type":"error","error":{"type":"overloaded_error",
    "message":"Overloaded"}}``."""
    return anthropic_error(error_obj)


# --------------------------------------------------------------------------- HTTP entry point


def normalize_http_error(
    provider: str, status: int, body_text: str, *, body_error_codes: bool = False
) -> ProviderError:
    """A non-OK HTTP response as a :class:`ProviderError`, by the provider's family rules.

    **body_error_codes** (``LabConfig.body_error_codes``, off: the reference reads the message
    only) lets an OpenAI-compatible body's ``error.code`` decide too: OpenAI's 404
    ``model_not_found`` is a model_error, and Z.ai's business codes under HTTP 429 re-code as
    billing whatever the text's language.

    ``original_error`` is ``{"provider", "status", "body"}`` (the raw body text), so the
    classifiers can read the provider's own message out of it.

    >>> body = '{"error":{"message":"Internal Server Error","code":500}}'
    >>> normalize_http_error("openrouter", 500, body).type  # the reference quirk
    'unknown'

    It dispatches to the registered adapter's ``normalize_http_error`` (looked up at call
    time), so a provider registered in :data:`lab.providers.PROVIDERS` maps its own errors.
    """
    return _adapter(provider).normalize_http_error(
        status, body_text, body_error_codes=body_error_codes
    )


def normalize_http_error_for_family(
    provider: str, family: str, status: int, body_text: str, *, body_error_codes: bool = False
) -> ProviderError:
    """The family rules behind :func:`normalize_http_error` (``provider`` names the
    endpoint in messages and ``original_error``)."""
    original = {"provider": provider, "status": status, "body": body_text}
    parsed = _parse_json(body_text)
    if family == "google":
        return google_provider_error(body_text or "", code=status, original_error=original)
    inner = {
        "type": _get(parsed, "error", "type"),
        "message": parse_error_message(provider, body_text, status),
    }
    error = anthropic_error({"type": "error", "error": inner}, status=status)
    return error.model_copy(update={"original_error": original})


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
    found = _first_text(
        original.get("message"),
        original.get("detail"),
        _get(original, "error", "message"),
        _get(original, "error", "detail"),
    )
    if found:
        return found
    body = original.get("body")
    parsed = _parse_json(body) if isinstance(body, str) else body
    if isinstance(parsed, Mapping):
        found = _first_text(
            _get(parsed, "error", "message"),
            _get(parsed, "error", "detail"),
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
