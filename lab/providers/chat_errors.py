"""The OpenAI-compatible error formatter: a failure of a chat-completions endpoint as a
:class:`~lab.model.ProviderError`.

``classify_openai_compatible_status`` is the status table (the module table of
:mod:`lab.errors`); ``openai_compatible_provider_error`` formats a thrown message ("<prefix>:
HTTP 429: ..."), ``openai_compatible_stream_error`` an error object inside the stream. Each
endpoint's prefix and business codes come from its adapter's ``error_options()`` (the
endpoint table, :mod:`lab.providers.openai_compat`). The names stay importable from
``lab.providers.openai_compat`` and ``lab.errors``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from lab.errors import (
    CODE_429_BALANCE,
    CODE_429_PLAN_ACCESS,
    OPENAI_API_ERROR_STATUSES,
    OPENAI_OVERLOADED_STATUSES,
    OPENAI_TIMEOUT_STATUSES,
    RATE_LIMIT_BALANCE_PHRASES,
    RATE_LIMIT_PLAN_ACCESS_PHRASES,
    code_string,
    first_text,
    inner_error,
    is_model_error_message,
    parse_status_code,
)
from lab.model import ErrorType, ProviderError
from lab.providers.dispatch import registered_adapter

__all__ = [
    "CODE_CONNECTION_REFUSED",
    "CONNECTION_REFUSED_PHRASES",
    "HTTP_STATUS_IN_MESSAGE",
    "OPENAI_COMPATIBLE_STREAM_DEFAULT_MESSAGE",
    "OpenAICompatibleErrorOptions",
    "StatusClassification",
    "classify_openai_compatible_status",
    "openai_compatible_provider_error",
    "openai_compatible_stream_error",
]

CONNECTION_REFUSED_PHRASES: tuple[str, ...] = ("econnrefused", "connection refused")
CODE_CONNECTION_REFUSED = "ECONNREFUSED"
HTTP_STATUS_IN_MESSAGE = re.compile(r"HTTP (\d{3})")


@dataclass(frozen=True, slots=True)
class OpenAICompatibleErrorOptions:
    """Per-provider knobs of the OpenAI-compatible error formatter."""

    prefix: str
    """``errorMessagePrefix``: messages read "<prefix>: HTTP 429: ..."."""
    balance_codes: frozenset[str] = frozenset()
    """Body business codes that mean "no balance" under HTTP 429 (lab addition)."""
    plan_access_codes: frozenset[str] = frozenset()
    """Body business codes that mean "your plan lacks this model" under HTTP 429."""


OPENAI_COMPATIBLE_STREAM_DEFAULT_MESSAGE = "{prefix}: provider API error"


class StatusClassification(NamedTuple):
    type: ErrorType
    code: str
    retryable: bool


def classify_openai_compatible_status(
    status: int | None, message: str | None
) -> StatusClassification:
    """``classifyOpenAICompatibleStatus`` (see the module table)."""
    if status is None:
        return StatusClassification("unknown", "unknown", False)
    code = str(status)
    lowered = (message or "").lower()
    if status in OPENAI_API_ERROR_STATUSES:
        return StatusClassification("api_error", code, False)
    if status == 429:
        if any(p in lowered for p in RATE_LIMIT_BALANCE_PHRASES):
            return StatusClassification("api_error", CODE_429_BALANCE, False)
        if any(p in lowered for p in RATE_LIMIT_PLAN_ACCESS_PHRASES):
            return StatusClassification("api_error", CODE_429_PLAN_ACCESS, False)
        return StatusClassification("rate_limit", code, True)
    if status in OPENAI_TIMEOUT_STATUSES:
        return StatusClassification("timeout", code, True)
    if status in OPENAI_OVERLOADED_STATUSES:
        return StatusClassification("provider_overloaded", code, True)
    return StatusClassification("api_error", code, False)


def _options(provider: str) -> OpenAICompatibleErrorOptions:
    """The endpoint's error options: its adapter's ``error_options`` (prefix, codes)."""
    adapter: Any = registered_adapter(provider)  # any class of the family has error_options
    if adapter.family != "openai_compatible":
        raise ValueError(f"{provider!r} is not an OpenAI-compatible provider")
    return adapter.error_options()


def openai_compatible_provider_error(
    provider: str,
    message: str,
    *,
    status: int | None = None,
    error_code: str | None = None,
    user_message: str | None = None,
    original_error: Any = None,
    prefix: str | None = None,
) -> ProviderError:
    """``normalizeOpenAICompatibleProviderError`` for a thrown error's ``message``
    (terminal HTTP errors read "HTTP <status>: <parsed message>").

    1. The status is "HTTP nnn" found in the message (else ``status``), classified by
       :func:`classify_openai_compatible_status`; a 429 whose body ``error_code`` is one of
       the provider's billing codes is re-coded (lab addition).
    2. Model-error text (message, or ``error_code``) -> model_error "<status>_model".
    3. Else "econnrefused"/"connection refused" -> api_error "ECONNREFUSED".
    4. Else "timeout" -> timeout, retryable, code kept.
    5. message = "<prefix>: <message>".
    """
    options = _options(provider)
    found = HTTP_STATUS_IN_MESSAGE.search(message) if re.search(r"HTTP [45]", message) else None
    if found:
        status = int(found.group(1))
    error_type, code, retryable = classify_openai_compatible_status(status, message)
    if error_type == "rate_limit" and error_code is not None:
        if error_code in options.balance_codes:
            error_type, code, retryable = "api_error", CODE_429_BALANCE, False
        elif error_code in options.plan_access_codes:
            error_type, code, retryable = "api_error", CODE_429_PLAN_ACCESS, False
    lowered = message.lower()
    if is_model_error_message(message) or (error_code and is_model_error_message(error_code)):
        error_type, retryable = "model_error", False
        code = f"{status}_model" if status is not None else "model_error"
    elif any(p in lowered for p in CONNECTION_REFUSED_PHRASES):
        error_type, code, retryable = "api_error", CODE_CONNECTION_REFUSED, False
    elif "timeout" in lowered:
        error_type, retryable = "timeout", True
    return ProviderError(
        type=error_type,
        message=f"{prefix or options.prefix}: {message}",
        retryable=retryable,
        code=code,
        status=status,
        user_message=user_message,
        original_error=original_error,
    )


def openai_compatible_stream_error(provider: str, error_obj: Mapping[str, Any]) -> ProviderError:
    """``processChunk``'s error branch for an SSE ``error`` object (or a chunk holding one).

    Status = the numeric ``code`` (or None), classified by
    :func:`classify_openai_compatible_status`; model-error text -> model_error
    "<code>_model" (or "model_error"); message = the raw message plus " (<error.type>)" when
    that type is not already in it; code = the classification code unless "unknown", else
    the raw code, else "unknown".
    """
    options = _options(provider)
    err = inner_error(error_obj)
    raw_code = err.get("code")
    status = parse_status_code(raw_code)
    raw_message = first_text(err.get("message")) or OPENAI_COMPATIBLE_STREAM_DEFAULT_MESSAGE.format(
        prefix=options.prefix
    )
    error_type, code, retryable = classify_openai_compatible_status(status, raw_message)
    raw_code_text = code_string(raw_code)
    if is_model_error_message(raw_message):
        error_type, retryable = "model_error", False
        code = f"{raw_code_text}_model" if raw_code_text else "model_error"
    elif code == "unknown":
        code = raw_code_text or "unknown"
    message = raw_message
    kind = err.get("type")
    if isinstance(kind, str) and kind and kind.lower() not in raw_message.lower():
        message = f"{raw_message} ({kind})"
    return ProviderError(
        type=error_type,
        message=message,
        retryable=retryable,
        code=code,
        status=status,
        original_error=dict(err),
    )
