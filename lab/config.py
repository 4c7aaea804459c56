"""One config object for everything a replay can tune.

Every heuristic of the normalization stack is a named field here (or in the nested
:class:`~lab.guards.SpillGuardConfig`) with the reference value as its default, so a notebook
can change it and every result records which config produced it (``StreamResult.config``).

A config can be given as a :class:`LabConfig`, a bare ``SpillGuardConfig`` (only the spill
guard changes), a ``dict`` or the path of a JSON file written by :meth:`LabConfig.save` or the
tuner notebook: :meth:`LabConfig.coerce` accepts all of them.
"""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lab.exceptions import LabError
from lab.guards.markup import MarkupGuardConfig
from lab.guards.spill import SpillGuardConfig

__all__ = ["ConfigError", "LabConfig", "field_docs", "fingerprints_held"]


class ConfigError(ValueError, LabError):
    """A config file or value could not be used; the message says which and why."""


class LabConfig(BaseModel):
    """Tunable behaviour of the adapters and guards. Defaults are the reference values."""

    model_config = ConfigDict(extra="forbid")

    spill: SpillGuardConfig = Field(default_factory=SpillGuardConfig)
    """Spill guard heuristics (reasoning glued to the first visible sentence)."""
    strip_think_blocks: bool = True
    """Route ``<think>…</think>`` found in content to reasoning."""
    capture_think_blocks_as_thoughts: bool = True
    """Keep stripped think text as reasoning (False drops it, bookkeeping unchanged)."""
    persona_name: str | None = None
    """Bot persona name: closes an unclosed think block at ``Name:`` and feeds the speaker guard."""
    speaker_guard: bool = False
    """``llm_stop_speaker_pattern_enabled``: cut the stream before a generic ``Label:`` line."""
    speaker_holdback_chars: int = Field(32, ge=0)
    """Characters the speaker guard holds back while it waits for a label to complete."""
    dedup_tail_chars: int = Field(4096, ge=0)
    """Rolling tail of streamed text that repeated deltas are compared with."""
    dedup_min_chars: int = Field(8, ge=0)
    """Deltas shorter than this are never deduplicated; also the minimum overlap."""
    markup: MarkupGuardConfig = Field(default_factory=MarkupGuardConfig)
    """What the markup guard recognizes as leaked protocol markup (harmony channels,
    Kimi/DeepSeek/XML/MiniMax tool blocks, special tokens) and its bounds
    (:class:`~lab.guards.markup.MarkupGuardConfig`)."""
    recover_markup: bool = False
    """Lab addition, off as in the reference (which passes leaked protocol markup through
    as text; the guard only names it: guard events ``markup``, the anomaly
    ``markup_leak``, the ``leak_kind`` column): recover it. Harmony ``analysis`` moves to
    reasoning and ``final`` stays the answer, a leaked tool block becomes a real call
    (``provider_fields["recovered_from"]`` names its class) and leaves the text, stray
    special tokens are removed."""
    verbatim_tool_calls: bool = False
    """Custom provider: recover tool calls written as text (``verbatim_tool_calling_enabled``)."""
    inactivity_timeout_s: float = Field(120.0, gt=0)
    """Live streams: give up when no data arrives for this long (OpenRouter default 120 s)."""
    max_exchange_s: float | None = Field(1800.0, gt=0)
    """Live streams: the longest one exchange may take, headers and body together, however
    slowly the bytes trickle in (``inactivity_timeout_s`` is per read, so a server sending
    a byte every few seconds never meets it). Past it the attempt ends with
    ``end_reason="time_limit"`` and a ``time_limit`` error chunk; the capture records it and
    replay ends there too. None: no limit. Applies to the lab's own transports and any
    ``httpx.HTTPTransport`` (:func:`lab.http.limits.install`)."""
    max_exchange_bytes: int | None = Field(256 * 1024 * 1024, gt=0, strict=True)
    """The most decoded body bytes one exchange is read for: 256 MiB, about five times the
    SSE of a 128,000-token answer, the largest output any model offers (OpenRouter's
    chunks in ``tests/realworld/`` average 300-390 bytes each), and nearly four times the
    200,000-chunk body of ``bench/bench_replay_floor.py``. Past it the attempt stops reading, live and on
    replay at the same read, with ``end_reason="byte_limit"`` and a ``byte_limit`` error
    chunk; an endless stream cannot grow memory without bound, nor a compressed body
    inflate past it (decoding is done in bounded pieces: :mod:`lab.http.decoding`). None:
    no limit."""
    stall_s: float = Field(2.0, gt=0)
    """Latency tables: a gap between two reads that carried visible text longer than this
    many seconds is a stall (``stalls`` / ``stall_ms`` of :func:`lab.tables.streams`). The
    reference has no stall notion; it changes no result, only what the tables count."""
    max_error_body_bytes: int = Field(64 * 1024, gt=0, strict=True)
    """The most decoded bytes of an HTTP error body (4xx/5xx) that are read: 64 KiB, ten
    times a large HTML error page; providers' JSON errors are a few hundred bytes. Past it
    the lab reads no further (the capture records ``byte_limit``) and the attempt's
    ``error`` says the body was cut, so a huge or inflating error body costs neither memory
    nor minutes of error classification."""
    client_retry_window_s: float = Field(60.0, ge=0)
    """Recording an SDK (``lab.recording_client``, ``lab proxy``): a request equal to one
    that failed (same method, URL and body; a transport error or HTTP 408, 409, 429 or 5xx)
    sent again within this many seconds of the failure is the client's automatic retry, and
    is recorded as the next attempt of the same logical request (label ``client_retry``).
    A request carrying the Stainless SDKs' ``x-stainless-retry-count`` header (openai,
    anthropic) is told by that header instead. 60 s: the longest ``Retry-After`` those SDKs
    honour; their own back-off tops out at 8 s. 0: only the header says so."""
    repair_cut_number_prefixes: bool = False
    """Lab addition, off as in the reference (docs/reference.md, "7.9 JSON repair" calls
    ``{"n": 12.`` malformed and refuses it): tool arguments cut inside a number (``12.``,
    ``1e+``) are repaired by dropping that entry, like a cut string."""
    body_error_codes: bool = False
    """Lab addition, off as in the reference (which reads an OpenAI-compatible HTTP error's
    message only): let the body's ``error.code`` decide too, so OpenAI's 404
    ``model_not_found`` is a ``model_error`` and Z.ai's business codes under HTTP 429
    (1113 balance, 1309/1311 plan) re-code as billing whatever the text's language."""
    all_tool_calls: bool = False
    """Lab addition, off as in the reference (which builds only the tool call at index 0; the
    others are listed in ``metadata["ignored_tool_calls"]`` and the anomaly
    ``parallel_tool_calls_dropped`` names them): build every streamed call of a step in index
    order, also when the first index is not 0 or the step ends with ``stop``; calls sent
    all at one index (a new id, or no id and a name after complete arguments) each get a
    slot of their own (the reference glues them: ``tool_calls_merged``)."""
    keep_cut_tool_calls: bool = False
    """Lab addition, off as in the reference (a call whose stream is cut before its finish
    chunk is never built; ``facts["cut_tool_calls"]`` names it and the anomaly
    ``truncated_tool_arguments`` fires): build it anyway, ``arguments_truncated=True``."""
    read_all_reasoning_fields: bool = False
    """Lab addition, off as in the reference (whose OpenAI-compatible adapter reads only each
    endpoint's declared reasoning field; other reasoning is counted and the anomaly
    ``reasoning_field_ignored`` fires): read ``reasoning_content``, ``reasoning``,
    ``reasoning_details`` (text and summary entries), a reasoning field sent as an object
    (``{"text": ...}``, Bedrock's shape through a gateway) and typed content lists
    (Mistral's ``{"type": "thinking"}`` parts) wherever they appear; OpenRouter reads
    ``reasoning_content`` when ``reasoning`` is empty."""
    normalize_usage_reasoning: bool = False
    """Lab addition, off as in the reference: when a usage block's completion tokens exclude
    reasoning (``total = prompt + completion + reasoning``, as xAI reports), add the
    reasoning so ``output_tokens`` includes it as everywhere else (the anomaly
    ``usage_excludes_reasoning`` says so under the default). Endpoints known to report this
    way (``xai``) always normalize."""
    usage_in_choices: bool = False
    """Lab addition, off as in the reference (which reads a chunk's top-level ``usage``
    only; a choice's own ``usage`` is counted as an ``unhandled_shape``): read the usage a
    choice carries when the chunk has none (Moonshot/Kimi puts it in ``choices[0]``)."""
    first_choice_only: bool = False
    """Lab addition, off as in the reference (which reads the first choice of every chunk,
    so with ``n > 1`` the answers interleave into one text; the anomaly ``choices_mixed``
    says so): read choice 0 alone."""
    keep_length_content: bool = False
    """Lab addition, off as in the reference (whose OpenAI-compatible adapter returns
    ``done`` for ``finish_reason: "length"`` and does not emit that chunk's content; it is
    kept in ``metadata["dropped_content"]`` and the anomaly ``length_content_dropped`` names
    it): emit it, as vLLM sends its last token in that chunk."""
    refusal_content_filter: bool = False
    """Lab addition, off as in the reference (which reads neither OpenAI's ``delta.refusal``
    nor the Responses API's ``response.refusal.delta``; the lab keeps the text in the
    result's ``refusal`` either way and the anomaly ``refusal`` names it): a stream whose
    answer is a refusal finishes ``content_filter`` instead of ``stop``."""
    usage_everywhere: bool = False
    """Lab addition, off as in the reference (whose ``custom`` catch-all reads a chunk's
    top-level ``usage`` only; usage where a named endpoint puts it, Groq's
    ``x_groq.usage``, is counted as an ``unhandled_shape``): ``custom`` reads usage in every
    place a registered endpoint reads it."""
    merge_resent_tool_headers: bool = False
    """Lab addition, off as in the reference (which appends every ``function.name`` piece,
    so a backend that sends a call's whole name again, with the same id or with none,
    yields ``llm_versionllm_version``; MiniMax on NVIDIA NIM resends it on every delta; the
    anomaly ``tool_call_header_resent`` says so): a resent name adds nothing to the name."""
    read_cumulative_tool_arguments: bool = False
    """Lab addition, off as in the reference (which appends every ``function.arguments``
    piece, so a backend that sends the arguments so far each time, ``{"a"``, ``{"a": 1``,
    ``{"a": 1}``, yields arguments that do not parse; the anomaly
    ``tool_arguments_resent`` says so): when every piece starts with the one before, the
    pieces together do not parse and the last one does, the last one is the arguments."""
    read_message_start_content: bool = False
    """Lab addition, off as in the reference (which reads content only from
    ``content_block_*`` events): an Anthropic ``message_start`` that already carries
    ``content`` and a ``stop_reason`` (a programmatic tool-calling continuation: the
    message is whole at its start, vercel/ai ``anthropic-programmatic-tool-calling``) is
    read as those blocks and that finish. Off, they are counted (``unhandled_shape``:
    ``message.content[]``, ``message.stop_reason``)."""
    dedup_keep_word_repeats: bool = False
    """Lab addition, off as in the reference (whose dedup drops any delta of
    ``dedup_min_chars``+ characters that the recent tail already ends with, so two 8-space
    indentation deltas come out as one; the anomaly ``dedup_dropped_repeat`` flags a dropped
    whitespace-only or one-word repeat): keep such a repeat
    (:func:`lab.guards.text.is_word_repeat`); a longer passage resent whole and a resent
    overlap are still dropped."""
    degrade: bool = True
    """Run the parameter-degradation ladder on degradable failures."""
    empty_response_is_error: bool = True
    """A 200 stream that ends with nothing at all (no content, reasoning, call, usage or
    error: an empty, binary or foreign-format body) ends with an ``empty_response`` error
    chunk. The reference pipeline reports such a turn as an empty response further up; the
    lab says it on the stream so tables and classifiers see it."""
    assemble_function_calls: bool = False
    """Lab addition, off as in the reference (docs/reference.md, "5.2 Gemini process_chunk"
    builds the first ``functionCall`` of each Gemini chunk as one whole call): build function
    calls as Gemini streams them: every ``functionCall`` part of a chunk, and a call whose
    arguments arrive as ``partialArgs`` over several chunks (``willContinue``; nested objects
    and arrays; no arguments at all) assembled into one call. Under the default the anomaly
    ``tool_calls_dropped`` names a stream where the reference rule dropped calls or built
    argument fragments as calls."""
    final_usage_only: bool = False
    """Lab addition, off as in the reference (docs/reference.md, "5.2 Gemini process_chunk"
    attaches the running usage to every chunk): a Gemini or Anthropic stream cut before the
    provider's final usage report (the chunk with ``finishReason``; ``message_delta``) reports
    no usage, since its counts so far understate what was generated; they stay in
    ``facts["provisional_usage"]``, and the anomaly ``usage_not_final`` names such a stream
    under either setting."""

    @classmethod
    def coerce(cls, value: Any) -> LabConfig:
        """Turn ``None``, a LabConfig, a SpillGuardConfig, a dict or a JSON path into a LabConfig."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, SpillGuardConfig):
            return cls(spill=value)
        if isinstance(value, (str, Path)):
            return cls.load(value)
        if isinstance(value, dict):
            try:
                if "spill" not in value and set(value) <= set(SpillGuardConfig.model_fields):
                    return cls(spill=SpillGuardConfig(**value))
                return cls.model_validate(value)
            except ValidationError as exc:
                raise ConfigError(f"invalid config: {_describe(exc)}") from None
        raise ConfigError(f"cannot use {type(value).__name__} as a config")

    @classmethod
    def load(cls, path: str | Path) -> LabConfig:
        """Read a config JSON file (a full LabConfig or just the spill guard's fields)."""
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{p}: config file does not exist") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{p}: not a JSON config file ({exc})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: a config file holds a JSON object")
        try:
            return cls.coerce(data)
        except ConfigError as exc:
            raise ConfigError(f"{p}: {exc}") from None

    def save(self, path: str | Path) -> Path:
        """Write this config as JSON (what ``lab replay --config`` reads)."""
        p = Path(path)
        p.write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")
        return p

    @classmethod
    def complete(cls) -> LabConfig:
        """The config with every switch that goes beyond the reference turned on.

        Replaying a capture under ``LabConfig()`` and under ``LabConfig.complete()``
        (``lab replay --compare``) shows what the reference pipeline loses on it. The switches
        are listed in :data:`COMPLETE_SWITCHES`.
        """
        return cls.model_validate(dict.fromkeys(COMPLETE_SWITCHES, True))

    def fingerprint(self) -> str:
        """A short stable id of this config (for tables comparing configs).

        It hashes the fields set away from their defaults only, so a field added later (at
        its reference default) leaves every earlier fingerprint as it was. Inside
        :func:`fingerprints_held` (a fleet replay) it is worked out once per config.
        """
        held = _HELD.get()
        if held is not None:
            hit = held.get(id(self))
            if hit is not None and hit[0] is self:
                return hit[1]
        import hashlib

        chosen = self.model_dump_json(exclude_defaults=True)
        fingerprint = hashlib.sha1(chosen.encode()).hexdigest()[:10]
        if held is not None:  # the config kept alive with it: its id stays its own
            if len(held) >= _HELD_MAX:  # configs made per call (a dict coerced): bounded
                held.clear()
            held[id(self)] = (self, fingerprint)
        return fingerprint


_HELD_MAX = 16
"""Configs a :func:`fingerprints_held` block remembers at most: a fleet has one or two; a
caller that passes a dict per replay makes a new one each time, which must not pile up."""

_HELD: ContextVar[dict[int, tuple[LabConfig, str]] | None] = ContextVar(
    "lab_config_fingerprints", default=None
)


@contextmanager
def fingerprints_held() -> Iterator[None]:
    """Within the block, each config's :meth:`~LabConfig.fingerprint` is worked out once:
    a replay of many streams under one config (every result records the fingerprint, and
    dumping the config for it took ~20 µs a stream). Configs must not change inside the
    block. A block inside another keeps the outer one's (a unit's replay inside a run of
    units)."""
    token = _HELD.set({}) if _HELD.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _HELD.reset(token)


def _describe(exc: ValidationError) -> str:
    """A pydantic error as one line: ``field: problem (got value)`` per error, ``; ``-joined."""
    spill_fields = set(SpillGuardConfig.model_fields)
    out = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(x) for x in err["loc"]) or "config"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "not a config field"
            if len(err["loc"]) == 1 and err["loc"][0] in spill_fields:
                msg += ' (a spill guard field: put it under "spill")'
            elif nearest := _nearest_field(err["loc"]):
                msg += f" (did you mean {nearest!r}?)"
        else:
            got = repr(err.get("input"))
            msg += f" (got {got if len(got) <= 60 else got[:57] + '...'})"
        out.append(f"{loc}: {msg}")
    return "; ".join(out)


def _nearest_field(loc: tuple[Any, ...]) -> str | None:
    """The valid field name closest to the unknown key at ``loc`` (``None`` if none is close),
    looked up in the model the key sits in (``LabConfig``, ``spill``, ...)."""
    import difflib

    model: Any = LabConfig
    for part in loc[:-1]:
        field = getattr(model, "model_fields", {}).get(part)
        model = getattr(field, "annotation", None)
        if not isinstance(model, type) or not issubclass(model, BaseModel):
            return None
    names = list(getattr(model, "model_fields", {}))
    close = difflib.get_close_matches(str(loc[-1]), names, n=1, cutoff=0.6)
    return close[0] if close else None


COMPLETE_SWITCHES: tuple[str, ...] = (
    "repair_cut_number_prefixes",
    "body_error_codes",
    "all_tool_calls",
    "keep_cut_tool_calls",
    "read_all_reasoning_fields",
    "normalize_usage_reasoning",
    "dedup_keep_word_repeats",
    "assemble_function_calls",
    "final_usage_only",
    "usage_in_choices",
    "merge_resent_tool_headers",
    "read_cumulative_tool_arguments",
    "read_message_start_content",
    "refusal_content_filter",
    "usage_everywhere",
    "keep_length_content",
    "first_choice_only",
    "recover_markup",
)
"""Every boolean field of :class:`LabConfig` that turns on behaviour beyond the reference
(default False); :meth:`LabConfig.complete` turns all of them on."""


def field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings (the string literal under each field) of a model class, each
    on one line (the tuner's tooltips and ``lab config example`` read them)."""
    docs: dict[str, str] = {}
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return docs
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    for node, nxt in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs
