"""The OpenAI-compatible endpoints: one class of data each over the chat-completions machine.

Each endpoint subclasses :class:`~lab.providers.chat.OpenAICompatibleAdapter` (the stream
machine, :mod:`lab.providers.chat`) and sets options only: its provider name, error prefix,
default base URL, key variable, and what its wire does differently (reasoning fields, usage
paths, typed content lists, a keyless placeholder). A new OpenAI-compatible endpoint is one
such class here plus its line in :data:`lab.providers.PROVIDERS`.

The error formatter (``openai_compatible_provider_error`` and friends) is in
:mod:`lab.providers.chat_errors`; it and the machine's public names stay importable from
here.
"""

from __future__ import annotations

from typing import Any

from lab.degrade import custom_should_retry_without_stop
from lab.guards import VerbatimToolCallParser
from lab.model import FunctionCall, ProcessedChunk, Usage
from lab.providers.chat import (  # noqa: F401 - re-exported: their home before the split
    CHOICE_KEYS,
    CHUNK_KEYS,
    DELTA_KEYS,
    OPENAI_COMPAT_BODY_ORDER,
    REASONING_FIELDS,
    TOOL_CALL_KEYS,
    OpenAICompatibleAdapter,
    first_dict,
    ordered_body,
)
from lab.providers.chat_errors import (  # noqa: F401 - re-exported, as above
    CODE_CONNECTION_REFUSED,
    CONNECTION_REFUSED_PHRASES,
    HTTP_STATUS_IN_MESSAGE,
    OPENAI_COMPATIBLE_STREAM_DEFAULT_MESSAGE,
    OpenAICompatibleErrorOptions,
    StatusClassification,
    classify_openai_compatible_status,
    openai_compatible_provider_error,
    openai_compatible_stream_error,
)
from lab.providers.wire import choice_usage, wire_int  # noqa: F401 - choice_usage re-exported
from lab.request import is_claude_model

__all__ = [
    "CustomAdapter",
    "DeepSeekAdapter",
    "FireworksAdapter",
    "GroqAdapter",
    "MistralAdapter",
    "NvidiaAdapter",
    "OllamaAdapter",
    "OpenAIAdapter",
    "OpenAICompatibleAdapter",
    "TogetherAdapter",
    "VllmAdapter",
    "XaiAdapter",
    "ZaiAdapter",
]


class OpenAIAdapter(OpenAICompatibleAdapter):
    """OpenAI's own chat completions."""

    provider = "openai"
    error_prefix = "OpenAI"
    max_tokens_key = "max_completion_tokens"
    drops_reasoning_history = True
    request_paths = {"/responses": "the OpenAI Responses API, host {host!r}"}
    default_base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"


class DeepSeekAdapter(OpenAICompatibleAdapter):
    """DeepSeek: reasoning_content is kept on the tool call for thinking-mode replay."""

    provider = "deepseek"
    error_prefix = "DeepSeek"
    thinking_as_object = True
    default_base_url = "https://api.deepseek.com"
    api_key_env = "DEEPSEEK_API_KEY"
    preserve_reasoning_content = True
    requires_reasoning_content_replay = True
    mandatory_body_keys = ("thinking",)

    def map_usage(self, raw: Any) -> Usage | None:
        """OpenAI-shaped usage, plus DeepSeek's ``prompt_cache_hit_tokens`` as the cache
        read when the details carry none."""
        usage = super().map_usage(raw)
        hit = wire_int(raw.get("prompt_cache_hit_tokens"))
        if hit is not None:
            if usage is None:
                usage = Usage()
            if not usage.cache_read_tokens:
                usage = usage.model_copy(update={"cache_read_tokens": hit})
        return usage


class ZaiAdapter(OpenAICompatibleAdapter):
    """Z.ai / Zhipu GLM (general endpoint; the coding plan uses ``/api/coding/paas/v4``)."""

    provider = "zai"
    error_prefix = "Z.ai"
    thinking_as_object = True
    balance_codes = frozenset({"1113"})
    plan_access_codes = frozenset({"1309", "1311"})
    default_base_url = "https://api.z.ai/api/paas/v4"
    host_aliases = ("open.bigmodel.cn",)
    api_key_env = "ZAI_API_KEY"


class NvidiaAdapter(OpenAICompatibleAdapter):
    """NVIDIA NIM hosted endpoints: opaque 5xx degrade, reasoning keys probed first."""

    provider = "nvidia"
    error_prefix = "NVIDIA"
    default_base_url = "https://integrate.api.nvidia.com/v1"
    api_key_env = "NVIDIA_API_KEY"
    mandatory_body_keys = ("chat_template_kwargs",)
    priority_keys = ("reasoning_budget",)  # degradationPriorityKeys
    degrade_on_opaque_5xx = True
    append_error_details_for_codes = ("400", "404", "500")


class GroqAdapter(OpenAICompatibleAdapter):
    """Groq: reasoning models stream ``reasoning``; a failed tool call's error carries the
    model's raw output in ``error.failed_generation`` (kept on ``ProviderError.original_error``)."""

    provider = "groq"
    error_prefix = "Groq"
    default_base_url = "https://api.groq.com/openai/v1"
    api_key_env = "GROQ_API_KEY"
    reasoning_fields = ("reasoning",)
    usage_paths = (("x_groq", "usage"),)


class XaiAdapter(OpenAICompatibleAdapter):
    """xAI Grok: ``reasoning_content``; its ``completion_tokens`` leave reasoning out, so
    usage is normalized (output = completion + reasoning) as everywhere else."""

    provider = "xai"
    error_prefix = "xAI"
    default_base_url = "https://api.x.ai/v1"
    api_key_env = "XAI_API_KEY"
    otel_name = "x_ai"
    completion_excludes_reasoning = True


class MistralAdapter(OpenAICompatibleAdapter):
    """Mistral: reasoning models (Magistral) stream ``content`` as a typed list of
    ``{"type": "thinking"}`` and ``{"type": "text"}`` parts."""

    provider = "mistral"
    error_prefix = "Mistral"
    default_base_url = "https://api.mistral.ai/v1"
    api_key_env = "MISTRAL_API_KEY"
    otel_name = "mistral_ai"
    typed_content_lists = True

    @classmethod
    def tool_id_style(cls, model: str) -> str | None:
        """Mistral's rule for every model it serves (a Claude id rule still wins)."""
        return "claude" if is_claude_model(model) else "mistral"


class TogetherAdapter(OpenAICompatibleAdapter):
    """Together AI: reasoning models stream ``reasoning`` (older ones ``<think>`` in content)."""

    provider = "together"
    error_prefix = "Together"
    default_base_url = "https://api.together.xyz/v1"
    api_key_env = "TOGETHER_API_KEY"
    reasoning_fields = ("reasoning", "reasoning_content")


class FireworksAdapter(OpenAICompatibleAdapter):
    """Fireworks AI: ``reasoning_content`` for reasoning models."""

    provider = "fireworks"
    error_prefix = "Fireworks"
    default_base_url = "https://api.fireworks.ai/inference/v1"
    api_key_env = "FIREWORKS_API_KEY"


class VllmAdapter(OpenAICompatibleAdapter):
    """A vLLM server (``vllm serve``): ``reasoning_content``, newer releases ``reasoning``;
    local servers need no key (``EMPTY`` sends none)."""

    provider = "vllm"
    error_prefix = "vLLM"
    default_base_url = "http://127.0.0.1:8000/v1"
    api_key_env = "VLLM_API_KEY"
    placeholder_api_key = "EMPTY"
    reasoning_fields = ("reasoning_content", "reasoning")


class OllamaAdapter(OpenAICompatibleAdapter):
    """Ollama's OpenAI-compatible endpoint: ``reasoning`` for thinking models; no key."""

    provider = "ollama"
    error_prefix = "Ollama"
    default_base_url = "http://127.0.0.1:11434/v1"
    api_key_env = "OLLAMA_API_KEY"
    placeholder_api_key = "ollama"
    reasoning_fields = ("reasoning",)


class CustomAdapter(OpenAICompatibleAdapter):
    """Any OpenAI-compatible server (vLLM, llama.cpp, LM Studio ...): base URL required.

    With ``config.verbatim_tool_calls`` on, tools exposed and the request carrying tool
    schemas, text content runs through :class:`~lab.guards.VerbatimToolCallParser`: a call
    written as text (``get_weather({"city": "Bern"})``) becomes a ``function_call`` chunk.
    """

    reads_usage_everywhere = True
    provider = "custom"
    error_prefix = "Custom"
    default_base_url = ""
    api_key_env = "CUSTOM_API_KEY"
    include_persona_speaker_stop = False
    requires_base_url = True
    request_paths = {"/chat/completions": "OpenAI-compatible, host {host!r}"}
    request_body_markers = {"messages[]": "OpenAI-compatible"}
    generic_markers = True  # any OpenAI-shaped request of an unknown vendor
    # mypy reads a callable class attribute as a method (self bound); this one is a plain
    # function, as the ClassVar on the base class says.
    should_retry_without_stop = staticmethod(custom_should_retry_without_stop)  # type: ignore[assignment]

    def reset(self) -> None:
        super().reset()
        self.verbatim: VerbatimToolCallParser | None = None
        if self.config.verbatim_tool_calls and self.tools:
            parser = VerbatimToolCallParser(self.tools)
            if parser.has_tools:
                self.verbatim = parser
        self._posting = self.verbatim is not None

    def post_chunk(self, chunk: ProcessedChunk) -> list[ProcessedChunk]:
        parser = self.verbatim
        if parser is None:
            return [chunk]
        out: list[ProcessedChunk] = []
        if chunk.type == "text" and chunk.content:
            pieces = self._ran(parser, parser.feed_all(chunk.content))
            first = True
            for p in pieces:
                if p.function_call is not None:
                    out.append(self._verbatim_call(p.function_call, chunk if first else None))
                elif p.text:
                    out.append(self._with(chunk if first else None, content=p.text))
                first = False
            if first:  # everything held back: keep the chunk's thoughts and metadata
                out.append(chunk.model_copy(update={"content": ""}))
            return out
        if chunk.type == "done":
            flushed = self._ran(parser, parser.flush())
            if flushed.text:
                out.append(ProcessedChunk(type="text", content=flushed.text))
            if flushed.function_call is not None:
                out.append(self._verbatim_call(flushed.function_call, chunk))
                return out
        out.append(chunk)
        return out

    @staticmethod
    def _with(chunk: ProcessedChunk | None, **update: Any) -> ProcessedChunk:
        if chunk is None:
            return ProcessedChunk(type="text", **update)
        return chunk.model_copy(update=update)

    def _verbatim_call(self, call: FunctionCall, chunk: ProcessedChunk | None) -> ProcessedChunk:
        fields: dict[str, Any] = {"type": "function_call", "function_call": call, "content": None}
        if chunk is None:
            return ProcessedChunk(**fields)
        return chunk.model_copy(update=fields)

    def post_flush(self) -> list[ProcessedChunk]:
        parser = self.verbatim
        if parser is None:
            return []
        flushed = self._ran(parser, parser.flush())
        out: list[ProcessedChunk] = []
        if flushed.text:
            out.append(ProcessedChunk(type="text", content=flushed.text))
        if flushed.function_call is not None:
            out.append(self._verbatim_call(flushed.function_call, None))
        return out
