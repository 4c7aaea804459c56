"""The unvalidated constructors the adapters use per chunk build what validation builds."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from lab.model import (
    CHECK_UNVALIDATED_ENV,
    FunctionCall,
    ProcessedChunk,
    ProviderError,
    ThoughtLogEntry,
    Usage,
    _shaped,
    _trusted,
    new_chunk,
    new_piece_chunk,
    new_raw_thought,
    new_text_chunk,
    new_thought,
)

texts = st.text(max_size=20)
thoughts = st.builds(
    lambda kind, content: ThoughtLogEntry(kind=kind, content=content),
    st.sampled_from(["raw", "summary"]),
    texts,
)
chunk_fields = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "function_call", "error", "done"])},
    optional={
        "content": st.none() | texts,
        "function_call": st.none() | st.builds(FunctionCall, name=st.just("f"), args=st.just({})),
        "error": st.none() | st.just(ProviderError(type="api_error", message="m", retryable=False)),
        "thoughts": st.lists(thoughts, max_size=3),
        "serving_provider": st.none() | texts,
        "metadata": st.dictionaries(
            st.sampled_from(["usage", "finish_reason", "outputTruncated"]),
            st.none() | st.booleans() | texts | st.just(Usage(input_tokens=3)),
            max_size=3,
        ),
    },
)


def _same(fast, validated) -> None:
    assert type(fast) is type(validated)
    assert list(fast.__dict__.items()) == list(validated.__dict__.items())  # order too
    assert fast.model_fields_set == validated.model_fields_set
    assert fast == validated
    assert repr(fast) == repr(validated)
    assert fast.model_dump_json() == validated.model_dump_json()
    assert fast.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)
    back = pickle.loads(pickle.dumps(fast))
    assert back == validated and back.model_fields_set == validated.model_fields_set


@given(chunk_fields)
def test_new_chunk_builds_what_processed_chunk_validation_builds(values):
    _same(new_chunk(**values), ProcessedChunk(**values))


@given(st.sampled_from(["raw", "summary"]), texts)
def test_new_thought_builds_what_thought_log_entry_validation_builds(kind, content):
    _same(new_thought(kind=kind, content=content), ThoughtLogEntry(kind=kind, content=content))


def test_new_chunk_gives_every_chunk_its_own_default_list_and_dict():
    a, b = new_chunk(type="text"), new_chunk(type="text")
    a.thoughts.append(new_thought(kind="raw", content="x"))
    a.metadata["k"] = 1
    assert (b.thoughts, b.metadata) == ([], {})
    assert (a.content, a.function_call, a.error, a.serving_provider) == (None, None, None, None)


def test_new_chunk_stores_the_list_it_is_given_where_validation_copies_it():
    given_thoughts = [new_thought(kind="raw", content="r")]
    assert new_chunk(type="text", thoughts=given_thoughts).thoughts is given_thoughts
    assert ProcessedChunk(type="text", thoughts=given_thoughts).thoughts is not given_thoughts


def test_new_chunk_model_copy_and_validation_round_trip():
    chunk = new_chunk(type="text", content="hi", serving_provider="Groq", metadata={"a": 1})
    assert chunk.model_copy(update={"content": "ho"}).content == "ho"
    assert ProcessedChunk.model_validate(chunk.model_dump()) == chunk


def test_the_suite_runs_the_builders_in_check_mode_which_refuses_a_bad_value():
    # conftest sets LAB_CHECK_UNVALIDATED=1 before lab is imported: every unvalidated build
    # in every test is validated and compared too
    with pytest.raises(ValidationError):
        new_chunk(type="text", content=5)
    with pytest.raises(ValidationError):
        new_chunk(type="text", contnet="misspelt")
    with pytest.raises(ValidationError):
        new_thought(content="no kind")


def test_without_check_mode_the_builder_stores_what_it_is_given(monkeypatch):
    monkeypatch.delenv(CHECK_UNVALIDATED_ENV)
    build = _trusted(ProcessedChunk)
    assert build(type="text", content=5).content == 5  # no validation: the caller's promise


@given(
    st.sampled_from(["text", "done"]),
    st.none() | texts,
    st.lists(thoughts, max_size=3),
    st.none() | texts,
    st.dictionaries(st.sampled_from(["usage", "finish_reason"]), st.none() | texts, max_size=2),
)
def test_new_piece_chunk_builds_what_processed_chunk_validation_builds(t, content, th, sp, meta):
    values = {
        "type": t,
        "content": content,
        "thoughts": th,
        "serving_provider": sp,
        "metadata": meta,
    }
    _same(new_piece_chunk(t, content, th, sp, meta), ProcessedChunk(**values))


@given(st.none() | texts, st.lists(thoughts, max_size=2), st.dictionaries(texts, texts, max_size=2))
def test_new_text_chunk_builds_what_processed_chunk_validation_builds(content, th, meta):
    values = {"type": "text", "content": content, "thoughts": th, "metadata": meta}
    _same(new_text_chunk(content, th, meta), ProcessedChunk(**values))


@given(texts)
def test_new_raw_thought_builds_what_thought_log_entry_validation_builds(content):
    _same(new_raw_thought(content), ThoughtLogEntry(kind="raw", content=content))


def test_a_shaped_builder_fills_defaults_and_fresh_factories_for_what_it_is_not_given():
    build = _shaped(ProcessedChunk, "content", type="done")
    a, b = build("x"), build("y")
    _same(a, ProcessedChunk(type="done", content="x"))
    assert a.model_fields_set == {"type", "content"}
    assert a.thoughts is not b.thoughts and a.metadata is not b.metadata
    a.content = "z"  # pydantic adds to the fields set: it is the chunk's own
    assert b.model_fields_set == {"type", "content"} and a.content == "z"


def test_a_shaped_builder_refuses_a_name_that_is_no_field_or_a_missing_required_one():
    with pytest.raises(TypeError, match="contnet"):
        _shaped(ProcessedChunk, "type", "contnet")
    with pytest.raises(TypeError, match="given twice"):
        _shaped(ProcessedChunk, "type", "type")
    with pytest.raises(TypeError, match="required field 'type'"):
        _shaped(ProcessedChunk, "content")


def test_in_check_mode_a_shaped_builder_refuses_a_bad_value():
    with pytest.raises(ValidationError):
        new_piece_chunk("txt", "x", [], None, {})
    with pytest.raises(ValidationError):
        new_raw_thought(5)


def _built_both_ways():
    # a model of each unvalidated builder and its twin of the same shape
    return [
        (new_chunk(type="text", content="a"), new_chunk(type="text", content="b")),
        (new_piece_chunk("text", "a", [], None, {}), new_piece_chunk("text", "b", [], None, {})),
        (new_raw_thought("a"), new_raw_thought("b")),
    ]


def test_models_of_one_shape_share_a_fields_set_that_refuses_to_change():
    for a, b in _built_both_ways():
        assert a.__pydantic_fields_set__ is b.__pydantic_fields_set__
        for change in (
            lambda s: s.add("error"),
            lambda s: s.update({"error"}),
            lambda s: s.discard("type"),
            lambda s: s.clear(),
        ):
            with pytest.raises(TypeError, match="shared by every model of one shape"):
                change(a.__pydantic_fields_set__)
        assert isinstance(a.__pydantic_fields_set__, set)
        # model_fields_set, pydantic's public face of it, is the model's own to add to
        a.model_fields_set.add("error")
        assert "error" in a.model_fields_set and "error" not in b.model_fields_set


def test_assigning_to_a_model_gives_it_its_own_fields_set_and_leaves_its_twin_alone():
    a, b = new_piece_chunk("text", "a", [], None, {}), new_piece_chunk("text", "b", [], None, {})
    a.error = ProviderError(type="api_error", message="m", retryable=False)
    assert a.model_fields_set == {
        "type",
        "content",
        "thoughts",
        "serving_provider",
        "metadata",
        "error",
    }
    assert b.model_fields_set == {"type", "content", "thoughts", "serving_provider", "metadata"}
    assert "error" in a.model_dump(exclude_unset=True)
    assert "error" not in b.model_dump(exclude_unset=True)


@pytest.mark.parametrize("deep", [False, True])
def test_model_copy_with_an_update_leaves_the_shape_fields_set_alone(deep):
    import copy

    for a, b in _built_both_ways():
        field = "metadata" if isinstance(a, ProcessedChunk) else "kind"
        value = {"k": 1} if field == "metadata" else "summary"
        shared = b.__pydantic_fields_set__  # model_fields_set would give b a set of its own
        before = set(shared)
        c = a.model_copy(update={field: value}, deep=deep)
        assert getattr(c, field) == value and field in c.__pydantic_fields_set__
        assert a.__pydantic_fields_set__ == before == shared
        for twin in (copy.copy(a), copy.deepcopy(a)):
            setattr(twin, field, value)
            assert shared == before and b.__pydantic_fields_set__ is shared


def test_a_pickled_model_of_a_shaped_builder_loads_and_changes_on_its_own():
    a, b = new_piece_chunk("text", "a", [], None, {}), new_piece_chunk("text", "b", [], None, {})
    a2, b2 = pickle.loads(pickle.dumps([a, b]))
    assert (a2, b2) == (a, b) and a2.model_fields_set == a.model_fields_set
    a2.content = "changed"
    assert b2.content == "b" and b2.model_fields_set == b.model_fields_set


def test_a_finished_results_chunks_without_thoughts_or_metadata_share_one_read_only_empty():
    import copy
    import pickle

    from lab.model import NO_METADATA, NO_THOUGHTS
    from lab.replay import replay_sse

    body = (
        b'data: {"choices":[{"delta":{"reasoning":"hm"}}]}\n\n'
        b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n'
        b'data: {"choices":[{"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,'
        b'"completion_tokens":2,"total_tokens":3}}\n\ndata: [DONE]\n\n'
    )
    result = replay_sse("openrouter", body)
    thinking, text, last = result.chunks[:3]
    assert thinking.thoughts[0].content == "hm" and thinking.metadata is NO_METADATA
    assert text.content == "Hi" and text.thoughts is NO_THOUGHTS and text.metadata is NO_METADATA
    assert last.metadata["finish_reason"] == "stop" and last.thoughts is NO_THOUGHTS
    # they are what they were: equal to a fresh chunk's, dumped as empty
    assert text == ProcessedChunk(type="text", content="Hi")
    assert text.model_dump()["thoughts"] == [] and text.model_dump()["metadata"] == {}
    # changing one says how to, instead of changing every chunk
    with pytest.raises(TypeError, match=r"chunk\.metadata = "):
        text.metadata["note"] = 1
    with pytest.raises(TypeError, match=r"chunk\.thoughts = "):
        text.thoughts.append(thinking.thoughts[0])
    text.metadata = {"note": 1}  # a dict of its own
    assert text.metadata == {"note": 1} and NO_METADATA == {}
    # pickled (parallel replay), still the one shared empty; a copy is the caller's own
    again = pickle.loads(pickle.dumps(result))
    assert again.chunks[1].thoughts is NO_THOUGHTS and again.chunks[0].metadata is NO_METADATA
    for shared, empty in ((NO_METADATA, {}), (NO_THOUGHTS, [])):
        for copied in (copy.copy(shared), copy.deepcopy(shared)):
            assert copied == empty and type(copied) is type(empty)
    mine = copy.copy(NO_METADATA)
    mine["note"] = 1
    assert NO_METADATA == {}
    with pytest.raises(TypeError):
        NO_METADATA.__init__(note=1)
    with pytest.raises(TypeError):
        NO_THOUGHTS.__init__([1])
    assert copy.deepcopy(result).chunks[1].thoughts == []  # a deep copy owns its lists
