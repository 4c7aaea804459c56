"""Types shared by every layer: providers, guards, processor, replay, tables.

These are the names of the public contract (``DESIGN.md``). They are pydantic v2 models so
they validate at boundaries and serialise to JSON for fixtures; the adapters' per-chunk loops
build chunks and thoughts from already-typed values with :data:`new_chunk` and
:data:`new_thought`, which skip the validator and build the same objects.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, Self, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "NO_METADATA",
    "NO_THOUGHTS",
    "ChunkOrigin",
    "ErrorType",
    "FunctionCall",
    "GuardEvent",
    "ProcessedChunk",
    "ProviderError",
    "RawStreamChunk",
    "ThoughtLogEntry",
    "Usage",
]

ErrorType = Literal[
    "api_error",
    "rate_limit",
    "content_blocked",
    "timeout",
    "provider_overloaded",
    "model_error",
    "unknown",
]


_new = object.__new__
# BaseModel's own descriptors for its three slots: setting through them directly skips
# object.__setattr__'s lookup (~35 ns each, three per chunk built). The instance dict is
# read as ``obj.__dict__``: the attribute lookup finds the same descriptor and costs less
# than calling its ``__get__`` (a call through a method wrapper builds an argument tuple)
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_M = TypeVar("_M", bound=BaseModel)

# How the unvalidated builders store a model's fields: into the dict the object makes for
# itself (``obj.__dict__``), key by key in field order, not as a dict of their own
# (``_set_dict``). CPython 3.11 then keeps the dict as a split table: the field names once
# per class, only the values per model (a chunk costs 224 bytes instead of 352, a replay's
# results about a fifth less; docs/PERFORMANCE.md). :func:`_share_keys` makes each class's
# first such dict, in field order, as the class is created, so a program that made many
# models of a class another way first (pydantic's own constructor, unpickling) does not
# keep the class from sharing. Elsewhere (another Python, keys in another order) the dict
# is an ordinary one: the same contents, only larger.


def _share_keys(cls: type[BaseModel]) -> None:
    """The class's first instance dict, its fields in order (see the comment above)."""
    _new(cls).__dict__.update(dict.fromkeys(cls.model_fields))


class _SharedFieldsSet(set):
    """The ``model_fields_set`` the unvalidated builders give every model of one call
    shape: one set, not one per chunk (each was one more object for the cyclic collector
    to scan when a replay ends: docs/PERFORMANCE.md). It is a set (pydantic's serializer
    reads it as one) that refuses to change; a model gets a set of its own before anything
    adds to it (assignment, ``model_copy``, ``copy``, reading ``model_fields_set``: see
    :class:`_Model`), so no other model's set ever changes with it. Only the deprecated
    ``__fields_set__`` hands out the shared set itself.
    """

    __slots__ = ()

    def _shared(self, *args: Any) -> Any:
        raise TypeError(
            "this fields set is shared by every model of one shape; it changes only through "
            "the model (assignment, model_copy), which gives the model its own first"
        )

    add = discard = remove = pop = clear = update = _shared
    intersection_update = difference_update = symmetric_difference_update = _shared
    __ior__ = __iand__ = __isub__ = __ixor__ = _shared


_thaw_lock = threading.Lock()


def _thaw(model: BaseModel) -> None:
    """A model of an unvalidated builder gets a fields set of its own (before anything adds
    to it).

    Under a lock, read again: two threads assigning to one model must not each give it a
    copy of the shared set (the second copy would drop the first thread's field).
    """
    if type(model.__pydantic_fields_set__) is _SharedFieldsSet:
        with _thaw_lock:
            fields_set = model.__pydantic_fields_set__
            if type(fields_set) is _SharedFieldsSet:
                _set_fields_set(model, set(fields_set))


def _rebuild(cls: type, fields: dict, fields_set: set, extra: Any, private: Any) -> Any:
    """A model from its state, without validating it: how one is unpickled (the state as
    it was pickled) and how :func:`_trusted` builds one."""
    obj: Any = _new(cls)
    obj.__dict__.update(fields)
    _set_fields_set(obj, fields_set)
    _set_extra(obj, extra)
    _set_private(obj, private)
    return obj


def _trusted(cls: type[_M]) -> Callable[..., _M]:
    """A constructor for ``cls`` that does not validate, for the adapters' per-chunk loops.

    ``build(**values)`` returns what ``cls(**values)`` returns for valid values: the same
    field values in field order, the same ``model_fields_set`` (one
    :class:`_SharedFieldsSet` per call shape), fresh default lists and dicts; it compares
    equal, dumps, prints and pickles the same. It costs about half as
    much (validation ran in pydantic's core for every chunk, and copied each list and dict
    it was given). Nothing is checked: a value is stored as given, of whatever type, and a
    name that is not a field is stored too. Use it only where every value already has its
    declared type (the adapters' normalizers guarantee that for the fields they pass) and
    for lists and dicts that no one else holds (validation would have copied them).
    """
    fields = cls.model_fields
    template = {
        name: None if f.is_required() or f.default_factory is not None else f.default
        for name, f in fields.items()
    }
    # every lab model's factories take no argument (list, dict, ...), none the validated data
    factories = [
        (name, cast("Callable[[], Any]", f.default_factory))
        for name, f in fields.items()
        if f.default_factory
    ]

    shared: dict[tuple[str, ...], _SharedFieldsSet] = {}  # one fields set per call shape

    def build(**values: Any) -> _M:
        state = {**template, **values}
        for name, factory in factories:
            if name not in values:
                state[name] = factory()
        fields_set = shared.get(shape := tuple(values))
        if fields_set is None:
            fields_set = shared[shape] = _SharedFieldsSet(values)
        return _rebuild(cls, state, fields_set, None, None)

    build.__name__ = build.__qualname__ = f"trusted_{cls.__name__}"
    if os.environ.get(CHECK_UNVALIDATED_ENV) == "1":
        return _checked(cls, build)
    return build


def _shaped(cls: type[_M], *names: str, **fixed: Any) -> Callable[..., _M]:
    """:func:`_trusted` for one call shape: ``build(v1, v2, ...)`` returns what
    ``cls(**fixed, **dict(zip(names, values)))`` returns for valid values, with the same
    caveats (nothing is checked).

    It is generated code, as dataclasses make their ``__init__``: the instance dict is one
    dict display in field order and ``model_fields_set`` the shape's one
    :class:`_SharedFieldsSet`, so a chunk of the hottest shapes costs about two thirds of
    ``build(**values)`` (no keyword dict to merge, no factory loop).
    """
    fields = cls.model_fields
    given = {**fixed, **dict.fromkeys(names)}
    unknown = [name for name in given if name not in fields]
    if unknown or len(given) != len(fixed) + len(names):
        raise TypeError(f"{cls.__name__}: not fields, or given twice: {unknown or names}")
    env: dict[str, Any] = {
        "_new": _new,
        "_cls": cls,
        "_set_fields_set": _set_fields_set,
        "_set_extra": _set_extra,
        "_set_private": _set_private,
        "_fields_set": _SharedFieldsSet(given),
    }
    items = []
    for i, (name, f) in enumerate(fields.items()):
        if name in names:
            value = f"_a{names.index(name)}"
        elif name in fixed:
            value = f"_fixed{i}"
            env[value] = fixed[name]
        elif f.default_factory is not None:
            value = f"_factory{i}()"
            env[f"_factory{i}"] = f.default_factory
        elif f.is_required():
            raise TypeError(f"{cls.__name__}: required field {name!r} is not given")
        else:
            value = f"_default{i}"
            env[value] = f.default
        items.append(f"    d[{name!r}] = {value}\n")
    params = ", ".join(f"_a{i}" for i in range(len(names)))
    src = (
        f"def build({params}):\n"
        "    obj = _new(_cls)\n"
        "    d = obj.__dict__\n"
        f"{''.join(items)}"
        "    _set_fields_set(obj, _fields_set)\n"
        "    _set_extra(obj, None)\n"
        "    _set_private(obj, None)\n"
        "    return obj\n"
    )
    exec(src, env)  # noqa: S102 - generated from field names, as dataclasses do
    build = env["build"]
    build.__name__ = build.__qualname__ = f"shaped_{cls.__name__}"
    if os.environ.get(CHECK_UNVALIDATED_ENV) == "1":
        checked = _checked(cls, lambda **values: build(*(values[name] for name in names)))

        def checked_build(*values: Any) -> _M:
            return checked(**fixed, **dict(zip(names, values, strict=True)))

        checked_build.__name__ = checked_build.__qualname__ = build.__name__
        return checked_build
    return cast("Callable[..., _M]", build)


CHECK_UNVALIDATED_ENV = "LAB_CHECK_UNVALIDATED"
"""Set to ``1`` before ``lab`` is imported (the test suite does) to have every unvalidated
build also validated and compared: a call site that passes a value of the wrong type, a
misspelt field or no required one then fails loudly instead of storing it."""


def _checked(cls: type[_M], build: Callable[..., _M]) -> Callable[..., _M]:
    def checked_build(**values: Any) -> _M:
        obj = build(**values)
        valid = cls(**values)  # raises ValidationError on a bad value or name
        if list(obj.__dict__.items()) != list(valid.__dict__.items()) or (
            obj.__pydantic_fields_set__ != valid.__pydantic_fields_set__
        ):  # not model_fields_set: that gives obj a set of its own
            raise AssertionError(f"unvalidated {cls.__name__} differs: {obj!r} != {valid!r}")
        return obj

    checked_build.__name__ = checked_build.__qualname__ = build.__name__
    return checked_build


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        _share_keys(cls)

    # A model an unvalidated builder made shares its fields set with its call shape
    # (_SharedFieldsSet). pydantic adds to the set on assignment and in
    # model_copy(update=...), a caller may add to model_fields_set: each gets its own first.
    def __setattr__(self, name: str, value: Any) -> None:
        _thaw(self)
        super().__setattr__(name, value)

    @property
    def model_fields_set(self) -> set[str]:
        """The fields set explicitly, as pydantic's: a set of this model's own that the
        caller may add to (a model of a builder gets it now, not the shared one)."""
        _thaw(self)
        return self.__pydantic_fields_set__

    def __copy__(self) -> Self:
        copied = super().__copy__()
        _thaw(copied)
        return copied

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        copied = super().__deepcopy__(memo)
        _thaw(copied)
        return copied

    def __reduce__(self) -> tuple:
        # Parallel replay sends every result between processes: pydantic's own
        # __getstate__/__setstate__ pair costs ~40 % more both ways (docs/PERFORMANCE.md).
        return _rebuild, (
            type(self),
            self.__dict__,
            self.__pydantic_fields_set__,
            self.__pydantic_extra__,
            self.__pydantic_private__,
        )

    def __repr_args__(self):  # leave default-valued fields out of reprs (notebook friendly)
        for name, value in super().__repr_args__():
            field = type(self).model_fields.get(name) if name else None
            if field is not None and not field.is_required():
                default = field.get_default(call_default_factory=True)
                if value == default:
                    continue
            yield name, value


class ThoughtLogEntry(_Model):
    """One piece of reasoning: ``raw`` model thinking or a provider ``summary`` of it."""

    kind: Literal["summary", "raw"]
    content: str


class FunctionCall(_Model):
    """A tool call the model made."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    thought_signature: str | None = None
    arguments_truncated: bool = False
    """True only when the argument JSON was cut short and then repaired (never fabricated)."""
    provider_fields: dict[str, Any] = Field(default_factory=dict)
    """Vendor continuity data: ``reasoning_details`` (OpenRouter),
    ``reasoning_content`` (DeepSeek), ``raw_arguments`` when arguments did not parse."""


class ProviderError(_Model):
    """A normalized provider failure, HTTP or mid-stream."""

    type: ErrorType
    message: str
    retryable: bool
    code: str = "unknown"
    status: int | None = None
    user_message: str | None = None
    original_error: Any = None


class RawStreamChunk(_Model):
    """A provider-native chunk (parsed JSON of one SSE event), before stage-03 processing."""

    data: Any
    provider: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class _ReadOnlyEmptyDict(dict):
    """The empty ``metadata`` finished chunks share (:data:`NO_METADATA`)."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(_SHARED_EMPTY_MESSAGE.format(field="metadata", kind="dict"))

    __setitem__ = __delitem__ = __ior__ = _refuse
    setdefault = update = pop = popitem = clear = _refuse

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args or kwargs:
            self._refuse()

    def __reduce__(self) -> str:
        return "NO_METADATA"  # unpickled as the one shared empty

    def __copy__(self) -> dict[str, Any]:
        return {}  # a copy is the caller's own, to change

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {}


class _ReadOnlyEmptyList(list):
    """The empty ``thoughts`` finished chunks share (:data:`NO_THOUGHTS`)."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(_SHARED_EMPTY_MESSAGE.format(field="thoughts", kind="list"))

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args or kwargs:
            self._refuse()

    def __reduce__(self) -> str:
        return "NO_THOUGHTS"

    def __copy__(self) -> list[Any]:
        return []

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return []


_SHARED_EMPTY_MESSAGE = (
    "this chunk's {field} is the empty {kind} every finished chunk without {field} shares; "
    "give the chunk one of its own to change it (chunk.{field} = ...)"
)
NO_METADATA: dict[str, Any] = _ReadOnlyEmptyDict()
"""The ``metadata`` of every chunk of a finished :class:`~lab.result.StreamResult` that has
none: one read-only empty dict, not one per chunk (memory of a replay's results: a chunk of
a long fleet is a few hundred bytes, and an empty dict 64 of them)."""
NO_THOUGHTS: list[Any] = _ReadOnlyEmptyList()
"""The ``thoughts`` of every chunk of a finished result that has none (as :data:`NO_METADATA`)."""


class ChunkOrigin(NamedTuple):
    """Where a processed chunk came from: attempt, SSE event index and the read that completed it.

    A NamedTuple, not a frozen dataclass: one is made per SSE event, and a frozen
    dataclass's ``__init__`` costs several times more. Defined here, with the chunk it
    describes, because the adapters record it (``StreamAdapter.origins``); it is
    ``StreamResult.origins``'s type and importable from :mod:`lab.result` as well.
    """

    attempt: int
    event: int
    read_seq: int

    def __reduce__(self) -> tuple:  # the inherited one goes through Python __getnewargs__
        return ChunkOrigin, tuple(self)


class ProcessedChunk(_Model):
    """A normalized chunk as the orchestrator consumes it.

    In a finished :class:`~lab.result.StreamResult`, a chunk with no thoughts or no metadata
    holds :data:`NO_THOUGHTS` / :data:`NO_METADATA`: one read-only empty list and dict
    shared by all such chunks (changing one raises ``TypeError``; assign a list or dict of
    the chunk's own instead: a copy of either, ``copy.copy(chunk.metadata)``, is a plain
    one). While a stream runs, every chunk has its own.
    """

    type: Literal["text", "function_call", "error", "done"]
    content: str | None = None
    function_call: FunctionCall | None = None
    error: ProviderError | None = None
    thoughts: list[ThoughtLogEntry] = Field(default_factory=list)
    serving_provider: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class GuardEvent(_Model):
    """A guard moved, dropped, truncated or recovered something.

    ``seq`` is the index of the raw chunk (SSE event) within the attempt that triggered it,
    ``offset`` the character offset within the guard's input stream where the affected text
    began, ``moved`` the text that moved (or was dropped / recovered), ``detail["rule"]`` the
    rule that fired.
    """

    guard: str
    stream_id: str = ""
    attempt: int = 0
    seq: int = -1
    offset: int = 0
    moved: str = ""
    detail: dict[str, Any] = Field(default_factory=dict)


class Usage(_Model):
    """Token usage as the provider reported it.

    ``input_tokens`` includes cached tokens, ``output_tokens`` includes reasoning tokens;
    ``cost`` is the provider-reported cost (USD) when the provider reports one.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    total_tokens: int | None = None
    cost: float | None = None


new_chunk = _trusted(ProcessedChunk)
"""``ProcessedChunk(**values)`` without validation, for per-chunk loops (see :func:`_trusted`)."""
new_thought = _trusted(ThoughtLogEntry)
"""``ThoughtLogEntry(**values)`` without validation, for per-chunk loops (see :func:`_trusted`)."""
new_piece_chunk = _shaped(
    ProcessedChunk, "type", "content", "thoughts", "serving_provider", "metadata"
)
"""``new_piece_chunk(type, content, thoughts, serving_provider, metadata)``: the chat
adapters' most common chunk (no call, no error) without validation (see :func:`_shaped`)."""
new_text_chunk = _shaped(ProcessedChunk, "content", "thoughts", "metadata", type="text")
"""``new_text_chunk(content, thoughts, metadata)``: a text chunk with no serving provider
(the OpenAI-compatible families) without validation (see :func:`_shaped`)."""
new_raw_thought = _shaped(ThoughtLogEntry, "content", kind="raw")
"""``new_raw_thought(content)``: ``ThoughtLogEntry(kind="raw", content=content)`` without
validation (see :func:`_shaped`)."""
new_token_usage = _shaped(
    Usage, "input_tokens", "output_tokens", "reasoning_tokens", "cache_read_tokens", "total_tokens"
)
"""``new_token_usage(input, output, reasoning, cache_read, total)``: the :class:`Usage` of
a family that reports no cost and no cache writes (Gemini's ``usageMetadata``) without
validation, for counts already read with ``wire_int`` (see :func:`_shaped`)."""
new_content_chunk = _shaped(ProcessedChunk, "content", "thoughts", type="text")
"""``new_content_chunk(content, thoughts)``: a text chunk with no serving provider and no
metadata (the Anthropic adapter's per-delta chunk) without validation (see :func:`_shaped`)."""
