"""The parameter-degradation ladder: which request body to try next after a rejection.

Pure planning, no I/O. OpenRouter and every OpenAI-compatible family (NVIDIA, DeepSeek, Z.ai,
Custom) share it; the adapter sends ``plan.current.body``, and on a failure (a non-OK HTTP
response, or an SSE error before the attempt commits) asks ``plan.on_failure(status, message)``
for the next attempt. ``None`` means give up and surface the error. Nothing is cached across
requests: build a new :class:`DegradationPlan` per request.

The static ladder (:func:`build_ladder`), every rung deduplicated by serialized body, a later
duplicate silently skipped::

    default                 the body as given
    no_stream_options       the *baseline*: body minus stream_options
    probe_drop_<key> ...    baseline minus one key, for every key except the mandatory ones
                            and tools, ranked: adapter priority_keys (their order), then
                            PARAM_DROP_PRIORITY (its order), then unknown keys (insertion order)
    strip_images            baseline with image blocks replaced by a [System: ...] notice
    probe_drop_tools        baseline minus tools (only when the baseline has tools)
    minimal_payload         only the mandatory keys (messages image-stripped when enabled)

One failure, one decision (:meth:`DegradationPlan.on_failure`, the reference's
``planDegradationRetry``)::

    failure(status, message) on attempt i
      |
      +-- queue targeted drop:  message names rejectable params present in the failing body
      |     (whole word)  ->  insert "targeted_drop_<p1>+<p2>" (all of them dropped at once)
      |     right after i; refused when 3 were already queued this request, or its body was
      |     already attempted; a later identical rung is removed
      +-- queue image strip:    message is a multimodal rejection and the failing body has
      |     image blocks  ->  insert "targeted_strip_images" right after i (so it runs before
      |     a targeted drop queued by the same failure); once per request, outside the cap
      +-- kind = classify_degradable_error(status, message, ...)
      |
      +-- no kind and nothing queued     -> None (give up)
      +-- i is the last rung             -> None (give up)
      +-- otherwise                      -> attempt i + 1 (becomes .current)

Once the three targeted retries are used up, further failures walk the static ladder only
while :func:`classify_degradable_error` still returns a kind.

Lab additions, none of which change a reference outcome: mandatory keys are never dropped
(no reference adapter declares a mandatory key that is also rejectable), and a rung whose
serialized body was already sent is skipped when advancing (the reference's queue rules
already make that impossible). ``strip_images`` may be a callable to replace the notice
stripper.

The one list of rejectable parameters and their probe order is :data:`PARAM_DROP_PRIORITY`
(plus ``stream_options`` in :data:`REJECTABLE_PARAM_TOKENS`).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "DEFAULT_MANDATORY_KEYS",
    "DEGRADABLE_KINDS",
    "GENERIC_ERROR_MESSAGES",
    "IMAGE_BLOCK_TYPES",
    "MAX_TARGETED_DEGRADATION_ATTEMPTS",
    "MULTIMODAL_REJECTION_PATTERNS",
    "PARAMETER_REJECTION_PHRASES",
    "PARAM_DROP_PRIORITY",
    "REJECTABLE_PARAM_TOKENS",
    "STOP_REJECTION_WORDS",
    "TRIGGER_LABELS",
    "UNKNOWN_KEY_RANK_OFFSET",
    "Attempt",
    "DegradationPlan",
    "ExtraClassifier",
    "FailureRecord",
    "build_image_strip_attempt",
    "build_ladder",
    "build_targeted_attempt",
    "classify_degradable_error",
    "count_image_blocks",
    "custom_should_retry_without_stop",
    "describe_degradation_trigger",
    "error_message_names_rejectable_param",
    "extract_rejected_params",
    "image_strip_notice",
    "is_generic_error_message",
    "is_multimodal_rejection",
    "messages_contain_image_blocks",
    "serialize_body",
    "stop_rejection",
    "stream_options_rejection",
    "strip_image_blocks_with_notice",
]

# --------------------------------------------------------------------------- constants

PARAM_DROP_PRIORITY: tuple[str, ...] = (
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
"""The shared probe order, and (with ``stream_options``) the only parameters an error message
can name for a targeted drop. The single definition of the rejectable-parameter list."""

REJECTABLE_PARAM_TOKENS: tuple[str, ...] = (*PARAM_DROP_PRIORITY, "stream_options")
"""Parameters :func:`extract_rejected_params` looks for, in this order."""

MAX_TARGETED_DEGRADATION_ATTEMPTS = 3
"""Targeted drops queued per request. The one image-strip retry does not count."""

UNKNOWN_KEY_RANK_OFFSET = 10
"""Keys in neither priority list rank at ``len(priority_keys) + 10``: after every known key."""

DEFAULT_MANDATORY_KEYS: tuple[str, ...] = ("model", "messages", "stream")

GENERIC_ERROR_MESSAGES: frozenset[str] = frozenset(
    {"", "error", "bad request", "request failed", "internal server error", "internal error"}
)
"""A message is *generic* when, trimmed, lowercased and stripped of trailing ``.``/``!``/
whitespace, it is one of these."""

PARAMETER_REJECTION_PHRASES: tuple[str, ...] = (
    "invalid api parameter",
    "unsupported parameter",
    "unknown parameter",
    "parameter not supported",
    "parameters are not yet supported",
)
"""Lowercase substrings that make a 400 a ``parameter_rejection_400``."""

NO_ENDPOINTS_PHRASE = "no endpoints found"
"""Lowercase substring that makes a 404 a ``no_endpoints_404`` (OpenRouter routing)."""

STREAM_OPTIONS_REJECTION_STATUSES: frozenset[int] = frozenset({400, 422})
STOP_REJECTION_STATUSES: frozenset[int] = frozenset({400, 422})
STOP_REJECTION_WORDS: tuple[str, ...] = (
    "unsupported",
    "unknown",
    "invalid",
    "not allowed",
    "unrecognized",
)
"""The Custom adapter's ``shouldRetryWithoutStop``: one of these next to "stop"."""

MULTIMODAL_KEYWORD = "multimodal"
MULTIMODAL_QUALIFIERS: tuple[str, ...] = ("not enabled", "not supported", "--enable-multimodal")
MULTIMODAL_REJECTION_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"does not support image", re.IGNORECASE),
    re.compile(r"image (?:input|content)s? (?:is|are) not supported", re.IGNORECASE),
    re.compile(r"vision is not (?:enabled|supported)", re.IGNORECASE),
)
"""Besides "multimodal" + one of :data:`MULTIMODAL_QUALIFIERS` (lowercase substrings)."""

IMAGE_BLOCK_TYPES: frozenset[str] = frozenset({"image_url", "image"})

IMAGE_STRIP_NOTICE_ONE = (
    "[System: An attached image was removed because this endpoint rejected image input. "
    "Do not guess or claim to see the image contents.]"
)
IMAGE_STRIP_NOTICE_MANY = (
    "[System: {count} attached images were removed because this endpoint rejected image "
    "input. Do not guess or claim to see the image contents.]"
)

# Attempt labels (the reference's).
LABEL_DEFAULT = "default"
LABEL_NO_STREAM_OPTIONS = "no_stream_options"
LABEL_PROBE_DROP_PREFIX = "probe_drop_"
LABEL_STRIP_IMAGES = "strip_images"
LABEL_PROBE_DROP_TOOLS = "probe_drop_tools"
LABEL_MINIMAL_PAYLOAD = "minimal_payload"
LABEL_TARGETED_DROP_PREFIX = "targeted_drop_"
LABEL_TARGETED_STRIP_IMAGES = "targeted_strip_images"

# Classification kinds returned by classify_degradable_error.
GENERIC_400 = "generic_400"
PARAMETER_REJECTION_400 = "parameter_rejection_400"
NO_ENDPOINTS_404 = "no_endpoints_404"
BACKEND_INCOMPATIBLE_502 = "backend_incompatible_502"
OPAQUE_5XX = "opaque_5xx"
PROVIDER_SPECIFIC = "provider_specific"
DEGRADABLE_KINDS: tuple[str, ...] = (
    GENERIC_400,
    PARAMETER_REJECTION_400,
    NO_ENDPOINTS_404,
    BACKEND_INCOMPATIBLE_502,
    OPAQUE_5XX,
    PROVIDER_SPECIFIC,
)

TRIGGER_LABELS: dict[str, str] = {
    GENERIC_400: "generic HTTP 400",
    PARAMETER_REJECTION_400: "parameter rejection (400)",
    NO_ENDPOINTS_404: "no endpoints found (404)",
    BACKEND_INCOMPATIBLE_502: "backend incompatible with parameters (502)",
    OPAQUE_5XX: "an opaque server error with no diagnostic message (5xx)",
    PROVIDER_SPECIFIC: "provider-specific parameter rejection",
}
TRIGGER_LABEL_IMAGE_STRIP = "a multimodal/image-input rejection"
TRIGGER_LABEL_NAMED_PARAMS = "an error naming request parameters"

ExtraClassifier = Callable[[int | None, str, Mapping[str, Any]], bool]
"""A provider-specific rejection test: ``(status, message, failing_body) -> bool``."""

# --------------------------------------------------------------------------- attempts


@dataclass(frozen=True, slots=True)
class Attempt:
    """One request body to send and the ladder label that produced it."""

    label: str
    body: dict[str, Any] = field(hash=False)


def serialize_body(body: Mapping[str, Any]) -> str:
    """The dedup key of a body: compact JSON in insertion order (``JSON.stringify`` alike)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=repr)


def _without(body: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """``body`` less ``keys``, each value a deep copy of its own (``copy.deepcopy``)."""
    drop = set(keys)
    return {k: _deep_copy(v, {}) for k, v in body.items() if k not in drop}


_ATOMIC = frozenset({str, int, float, bool, type(None)})


def _deep_copy(value: Any, memo: dict[int, Any]) -> Any:
    """``copy.deepcopy(value, memo)``, the JSON values a request body is made of copied
    here: a dict or list rebuilt (once, however often it appears in ``value``, as deepcopy
    does), a string, number, bool or None kept as it is (as deepcopy keeps them). Any other
    value goes to ``copy.deepcopy`` with the same memo. A plan copies its body twice, and
    deepcopy's dispatch per value took ~1 ms of a replayed stream with a 50 KB body."""
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if kind is dict:
        done = memo.get(id(value))
        if done is None:
            done = memo[id(value)] = {}
            for k, v in value.items():
                done[k if type(k) is str else _deep_copy(k, memo)] = _deep_copy(v, memo)
        return done
    if kind is list:
        done = memo.get(id(value))
        if done is None:
            done = memo[id(value)] = []
            done.extend([_deep_copy(v, memo) for v in value])
        return done
    return copy.deepcopy(value, memo)


def build_targeted_attempt(body: Mapping[str, Any], params: Sequence[str]) -> Attempt:
    """``targeted_drop_<p1>+<p2>...``: ``body`` minus every named param at once."""
    return Attempt(LABEL_TARGETED_DROP_PREFIX + "+".join(params), _without(body, params))


def build_image_strip_attempt(
    body: Mapping[str, Any],
    strip: Callable[[list[Any]], list[Any]] | None = None,
) -> Attempt | None:
    """``targeted_strip_images``: ``body`` with image blocks replaced by the notice.

    None when ``messages`` is not a list or holds no image blocks.
    """
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages_contain_image_blocks(messages):
        return None
    stripper = strip or strip_image_blocks_with_notice
    new_body = _without(body, ())
    new_body["messages"] = stripper(copy.deepcopy(messages))
    return Attempt(LABEL_TARGETED_STRIP_IMAGES, new_body)


def _probe_rank(key: str, priority_keys: Sequence[str]) -> int:
    if key in priority_keys:
        return list(priority_keys).index(key)
    if key in PARAM_DROP_PRIORITY:
        return len(priority_keys) + PARAM_DROP_PRIORITY.index(key)
    return len(priority_keys) + UNKNOWN_KEY_RANK_OFFSET


def _resolve_stripper(
    strip_images: bool | Callable[[list[Any]], list[Any]],
) -> Callable[[list[Any]], list[Any]] | None:
    if strip_images is True:
        return strip_image_blocks_with_notice
    if callable(strip_images):
        return strip_images
    return None


def build_ladder(
    body: Mapping[str, Any],
    *,
    mandatory_keys: Iterable[str] = DEFAULT_MANDATORY_KEYS,
    priority_keys: Sequence[str] = (),
    strip_images: bool | Callable[[list[Any]], list[Any]] = True,
) -> list[Attempt]:
    """The static degradation ladder for one request (reference ``buildDegradationAttempts``).

    **Parameters**

    * **body** - the full request body; never mutated, every rung gets its own deep copy.
    * **mandatory_keys** - keys no rung drops (adapters add e.g. DeepSeek's ``thinking``).
    * **priority_keys** - adapter keys probed first, in this order (NVIDIA
      ``reasoning_budget``).
    * **strip_images** - True: the notice-injecting :func:`strip_image_blocks_with_notice`;
      False: no image rung; a callable: your own stripper.

    Rungs, deduplicated by :func:`serialize_body` (the first wins): ``default``,
    ``no_stream_options``, ``probe_drop_<key>`` per optional key, ``strip_images``,
    ``probe_drop_tools``, ``minimal_payload``.

    >>> [a.label for a in build_ladder({"model": "m", "messages": [], "stream": True,
    ...                                 "stream_options": {}, "top_p": 1, "seed": 4})]
    ['default', 'no_stream_options', 'probe_drop_top_p', 'probe_drop_seed', 'minimal_payload']
    """
    mandatory = tuple(mandatory_keys)
    stripper = _resolve_stripper(strip_images)
    ladder: list[Attempt] = []
    seen: set[str] = set()

    def add(label: str, rung_body: dict[str, Any]) -> None:
        key = serialize_body(rung_body)
        if key not in seen:
            seen.add(key)
            ladder.append(Attempt(label, rung_body))

    add(LABEL_DEFAULT, _without(body, ()))
    dropped_from_baseline = () if "stream_options" in mandatory else ("stream_options",)
    baseline = _without(body, dropped_from_baseline)
    add(LABEL_NO_STREAM_OPTIONS, baseline)

    probe_keys = [k for k in baseline if k not in mandatory and k != "tools"]
    probe_keys.sort(key=lambda k: _probe_rank(k, priority_keys))  # stable: ties keep order
    for key in probe_keys:
        add(LABEL_PROBE_DROP_PREFIX + key, _without(baseline, (key,)))

    stripped_messages: Any = None
    stripped = False
    if stripper is not None and "messages" in baseline:
        messages = baseline["messages"]
        stripped_messages = (
            stripper(copy.deepcopy(messages)) if isinstance(messages, list) else messages
        )
        stripped = True
        strip_body = _without(baseline, ())
        strip_body["messages"] = stripped_messages
        add(LABEL_STRIP_IMAGES, strip_body)

    if "tools" in baseline and "tools" not in mandatory:
        add(LABEL_PROBE_DROP_TOOLS, _without(baseline, ("tools",)))

    minimal = {k: copy.deepcopy(v) for k, v in baseline.items() if k in mandatory}
    if stripped and "messages" in minimal:
        minimal["messages"] = copy.deepcopy(stripped_messages)
    add(LABEL_MINIMAL_PAYLOAD, minimal)
    return ladder


# --------------------------------------------------------------------------- classification


def is_generic_error_message(message: str | None) -> bool:
    """True for an empty or content-free message ("Bad Request.", "error", ...)."""
    normalized = (message or "").strip().lower().rstrip(".! \t\r\n\f\v")
    return normalized in GENERIC_ERROR_MESSAGES


def classify_degradable_error(
    status: int | None,
    message: str | None,
    *,
    degrade_on_502: bool = False,
    degrade_on_opaque_5xx: bool = False,
    extra_classifiers: Iterable[ExtraClassifier] = (),
    body: Mapping[str, Any] | None = None,
) -> str | None:
    """Which kind of degradable rejection this is, or None (reference
    ``classifyDegradableError``). The first match wins:

    1. 400 + generic message                       -> ``generic_400``
    2. 400 + a :data:`PARAMETER_REJECTION_PHRASES`  -> ``parameter_rejection_400``
    3. 404 + "no endpoints found"                  -> ``no_endpoints_404``
    4. 502 and ``degrade_on_502`` (OpenRouter)     -> ``backend_incompatible_502``
    5. ``degrade_on_opaque_5xx`` (NVIDIA), >= 500, generic message -> ``opaque_5xx``
    6. any extra classifier(status, message, body) -> ``provider_specific``

    ``body`` is the failing request body handed to the extra classifiers (empty if None).
    """
    text = message or ""
    lowered = text.lower()
    if status == 400 and is_generic_error_message(text):
        return GENERIC_400
    if status == 400 and any(p in lowered for p in PARAMETER_REJECTION_PHRASES):
        return PARAMETER_REJECTION_400
    if status == 404 and NO_ENDPOINTS_PHRASE in lowered:
        return NO_ENDPOINTS_404
    if status == 502 and degrade_on_502:
        return BACKEND_INCOMPATIBLE_502
    if degrade_on_opaque_5xx and status is not None and status >= 500:
        if is_generic_error_message(text):
            return OPAQUE_5XX
    failing_body: Mapping[str, Any] = body if body is not None else {}
    if any(classifier(status, text, failing_body) for classifier in extra_classifiers):
        return PROVIDER_SPECIFIC
    return None


def describe_degradation_trigger(kind: str | None, queued_image_strip: bool = False) -> str:
    """Operator-log wording for why a retry happened (reference
    ``describeDegradationTrigger``)."""
    if kind is not None:
        return TRIGGER_LABELS.get(kind, kind)
    return TRIGGER_LABEL_IMAGE_STRIP if queued_image_strip else TRIGGER_LABEL_NAMED_PARAMS


def stream_options_rejection(status: int | None, message: str, body: Mapping[str, Any]) -> bool:
    """OpenAI-compatible extra classifier (a): the failing body has ``stream_options``, the
    status is 400/422 and the message mentions ``stream_options``."""
    return (
        "stream_options" in body
        and status in STREAM_OPTIONS_REJECTION_STATUSES
        and "stream_options" in (message or "").lower()
    )


def stop_rejection(hook: Callable[[int | None, str], bool]) -> ExtraClassifier:
    """OpenAI-compatible extra classifier (b) for an adapter's ``shouldRetryWithoutStop``:
    the failing body has ``stop``, the status is known and ``hook(status, message)`` is true.
    """

    def classifier(status: int | None, message: str, body: Mapping[str, Any]) -> bool:
        return "stop" in body and status is not None and bool(hook(status, message))

    return classifier


def custom_should_retry_without_stop(status: int | None, message: str) -> bool:
    """The Custom adapter's hook: 400/422, "stop" and one of :data:`STOP_REJECTION_WORDS`."""
    lowered = (message or "").lower()
    return (
        status in STOP_REJECTION_STATUSES
        and "stop" in lowered
        and any(word in lowered for word in STOP_REJECTION_WORDS)
    )


_PARAM_PATTERNS: dict[str, re.Pattern[str]] = {
    p: re.compile(rf"\b{re.escape(p)}\b", re.IGNORECASE) for p in REJECTABLE_PARAM_TOKENS
}


def extract_rejected_params(message: str | None, body: Mapping[str, Any]) -> list[str]:
    """Rejectable params (list order) that are keys of ``body`` and appear in ``message`` as
    a whole word, case-insensitively (``my_min_p_override`` does not name ``min_p``)."""
    text = message or ""
    return [p for p in REJECTABLE_PARAM_TOKENS if p in body and _PARAM_PATTERNS[p].search(text)]


def error_message_names_rejectable_param(message: str | None) -> bool:
    """:func:`extract_rejected_params` without the body: does the message name any?"""
    text = message or ""
    return any(_PARAM_PATTERNS[p].search(text) for p in REJECTABLE_PARAM_TOKENS)


# --------------------------------------------------------------------------- images


def is_multimodal_rejection(message: str | None) -> bool:
    """Does the endpoint reject image input? (reference ``isMultimodalRejectionError``)

    >>> is_multimodal_rejection("Multimodal input is not enabled; restart with --enable-multimodal")
    True
    >>> is_multimodal_rejection("multimodal model ready")
    False
    """
    text = message or ""
    lowered = text.lower()
    if MULTIMODAL_KEYWORD in lowered and any(q in lowered for q in MULTIMODAL_QUALIFIERS):
        return True
    return any(p.search(text) for p in MULTIMODAL_REJECTION_PATTERNS)


def _is_image_block(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") in IMAGE_BLOCK_TYPES


def _content(message: Any) -> Any:
    return message.get("content") if isinstance(message, Mapping) else None


def count_image_blocks(messages: Iterable[Any]) -> int:
    """Image blocks (``type`` ``image_url``/``image``) in list contents; strings never count."""
    return sum(
        sum(1 for block in content if _is_image_block(block))
        for content in map(_content, messages)
        if isinstance(content, list)
    )


def messages_contain_image_blocks(messages: Iterable[Any]) -> bool:
    return count_image_blocks(messages) > 0


def image_strip_notice(count: int) -> str:
    """The ``[System: ...]`` text that replaces ``count`` removed images in one message."""
    return IMAGE_STRIP_NOTICE_ONE if count == 1 else IMAGE_STRIP_NOTICE_MANY.format(count=count)


def strip_image_blocks_with_notice(messages: Sequence[Any]) -> list[Any]:
    """Remove image blocks, leaving one notice text block per affected message.

    The notice sits where the message's first image was. Messages without image blocks (or
    with string content) are returned as the same objects; affected messages are shallow
    copies with a new content list. The input list and its messages are never mutated.
    """
    result: list[Any] = []
    for message in messages:
        content = _content(message)
        if not isinstance(content, list) or not any(_is_image_block(b) for b in content):
            result.append(message)
            continue
        kept: list[Any] = []
        notice_at = -1
        removed = 0
        for block in content:
            if _is_image_block(block):
                if removed == 0:
                    notice_at = len(kept)  # the notice goes where the first image was
                removed += 1
            else:
                kept.append(block)
        kept.insert(notice_at, {"type": "text", "text": image_strip_notice(removed)})
        new_message = dict(message)
        new_message["content"] = kept
        result.append(new_message)
    return result


# --------------------------------------------------------------------------- the plan


class FailureRecord(NamedTuple):
    """One failure the plan saw: which attempt, what the provider said, how it classified."""

    attempt: Attempt
    status: int | None
    message: str
    classification: str | None


class DegradationPlan:
    """The per-request degradation queue (reference ``planDegradationRetry`` plus the
    adapters' ``queueTargetedAttempt`` / ``queueImageStripAttempt``).

    >>> plan = DegradationPlan({"model": "m", "messages": [], "stream": True, "top_k": 5,
    ...                         "min_p": 0.1})
    >>> plan.current.label
    'default'
    >>> plan.on_failure(400, "Unrecognized request argument supplied: min_p").label
    'targeted_drop_min_p'
    >>> plan.on_failure(503, "Service Unavailable") is None
    True

    Attributes: ``current`` (the attempt to send), ``attempts`` (the queue as it stands),
    ``index`` (of ``current``), ``history`` (one :class:`FailureRecord` per failure),
    ``path`` (labels sent so far), ``last_trigger`` (why the last retry happened),
    ``targeted_count`` and ``image_strip_queued``.

    ``strip_images=False`` turns off both the static ``strip_images`` rung and the targeted
    image strip. ``extra_classifiers`` are called with the failing attempt's body.

    Only the ``default`` rung is built up front; the rest of the ladder (:func:`build_ladder`
    over a copy of **body** taken here) is built the first time it is needed: on the first
    failure, or when :attr:`attempts` is read (so a **strip_images** callable is first
    called then). Nearly every request succeeds at its first attempt, and a fleet replay
    builds one plan per stream.
    """

    def __init__(
        self,
        body: Mapping[str, Any],
        *,
        mandatory_keys: Iterable[str] = DEFAULT_MANDATORY_KEYS,
        priority_keys: Sequence[str] = (),
        degrade_on_502: bool = False,
        degrade_on_opaque_5xx: bool = False,
        extra_classifiers: Iterable[ExtraClassifier] = (),
        strip_images: bool | Callable[[list[Any]], list[Any]] = True,
        max_targeted_attempts: int = MAX_TARGETED_DEGRADATION_ATTEMPTS,
    ) -> None:
        self.mandatory_keys = tuple(mandatory_keys)
        self.degrade_on_502 = degrade_on_502
        self.degrade_on_opaque_5xx = degrade_on_opaque_5xx
        self.extra_classifiers = tuple(extra_classifiers)
        self.max_targeted_attempts = max_targeted_attempts
        self._stripper = _resolve_stripper(strip_images)
        self._priority_keys = tuple(priority_keys)
        self._strip_images = strip_images
        self._default = Attempt(LABEL_DEFAULT, _without(body, ()))  # build_ladder's first rung
        self._source: dict[str, Any] | None = _without(body, ())  # the rest is built from it
        # the body as given, kept: nothing changes it (build_ladder copies what it takes)
        self._given: dict[str, Any] = self._source
        self._ladder: list[Attempt] | None = None
        self._sent: set[str] | None = None  # see _attempted
        self.index = 0
        self.history: list[FailureRecord] = []
        self.path: list[str] = [LABEL_DEFAULT]
        self.last_trigger: str | None = None
        self.targeted_count = 0
        self.image_strip_queued = False

    @property
    def _attempted(self) -> set[str]:
        """The bodies sent so far (:func:`serialize_body`), the default as it was given (a
        caller may change the body it sends; the ladder's later rungs are built from the
        body as given all the same). Serialized at the first failure, not up front: nearly
        every request succeeds at its first attempt, and a large body (a long conversation,
        many tools) took ~0.6 ms to serialize."""
        if self._sent is None:
            self._sent = {serialize_body(self._given)}
        return self._sent

    @property
    def attempts(self) -> list[Attempt]:
        """The queue as it stands: the ladder with the targeted rungs queued so far."""
        return self._build_ladder()

    @attempts.setter
    def attempts(self, attempts: list[Attempt]) -> None:
        self._ladder, self._source = attempts, None

    def _build_ladder(self) -> list[Attempt]:
        """The ladder, built once (see the class docstring)."""
        if self._ladder is None:
            assert self._source is not None
            ladder = build_ladder(
                self._source,
                mandatory_keys=self.mandatory_keys,
                priority_keys=self._priority_keys,
                strip_images=self._strip_images,
            )
            ladder[0] = self._default  # the rung already handed out (equal to the one built)
            self._ladder, self._source = ladder, None
        return self._ladder

    @property
    def current(self) -> Attempt:
        if self._ladder is None and self.index == 0:
            return self._default
        return self.attempts[self.index]

    def on_failure(self, status: int | None, message: str | None) -> Attempt | None:
        """Record a failure of :attr:`current`; return the next attempt (now ``current``) or
        None to give up."""
        self._build_ladder()  # the whole ladder from here on
        text = message or ""
        failing = self.current
        queued_targeted = self._queue_targeted(failing, text)
        queued_strip = self._queue_image_strip(failing, text)
        kind = classify_degradable_error(
            status,
            text,
            degrade_on_502=self.degrade_on_502,
            degrade_on_opaque_5xx=self.degrade_on_opaque_5xx,
            extra_classifiers=self.extra_classifiers,
            body=failing.body,
        )
        self.history.append(FailureRecord(failing, status, text, kind))
        if kind is None and not queued_targeted and not queued_strip:
            return None
        nxt = self.index + 1
        while (
            nxt < len(self.attempts) and serialize_body(self.attempts[nxt].body) in self._attempted
        ):
            nxt += 1  # defensive: never send one body twice
        if nxt >= len(self.attempts):
            return None
        self.index = nxt
        self.last_trigger = describe_degradation_trigger(kind, queued_strip)
        self.path.append(self.current.label)
        self._attempted.add(serialize_body(self.current.body))
        return self.current

    # -- queue callbacks

    def _insert_after_current(self, attempt: Attempt) -> bool:
        key = serialize_body(attempt.body)
        if key in self._attempted:
            return False
        later = self.attempts[self.index + 1 :]
        later = [a for a in later if serialize_body(a.body) != key]
        self.attempts[self.index + 1 :] = [attempt, *later]
        return True

    def _queue_targeted(self, failing: Attempt, message: str) -> bool:
        if self.targeted_count >= self.max_targeted_attempts:
            return False
        params = [
            p
            for p in extract_rejected_params(message, failing.body)
            if p not in self.mandatory_keys
        ]
        if not params:
            return False
        if not self._insert_after_current(build_targeted_attempt(failing.body, params)):
            return False
        self.targeted_count += 1
        return True

    def _queue_image_strip(self, failing: Attempt, message: str) -> bool:
        if self.image_strip_queued or self._stripper is None:
            return False
        if not is_multimodal_rejection(message):
            return False
        attempt = build_image_strip_attempt(failing.body, self._stripper)
        if attempt is None or not self._insert_after_current(attempt):
            return False
        self.image_strip_queued = True
        return True
