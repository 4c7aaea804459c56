"""What a user did with results and chunks before the replay speed-ups (shaped builders,
shared fields sets, a flat array for origins that was reverted for this) and still can."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from lab.model import FunctionCall, ProcessedChunk, ProviderError, new_piece_chunk
from lab.replay import replay_sse

BODY = (Path(__file__).parent / "realworld" / "openai-gpt41nano-text.sse").read_bytes()


def test_json_dumps_of_a_replayed_results_origins_is_the_list_of_triples():
    r = replay_sse("openai", BODY, stream_id="x")
    want = [[o.attempt, o.event, o.read_seq] for o in r.origins]
    assert len(want) == len(r.chunks) > 3
    assert json.loads(json.dumps(r.origins)) == want  # as with the list of ChunkOrigin it was


def test_a_replayed_results_origins_concatenate_and_copy_as_a_list():
    r = replay_sse("openai", BODY, stream_id="x")
    n = len(r.origins)
    assert len(r.origins + r.origins[:1]) == n + 1
    assert r.origins.copy() == list(r.origins)  # type: ignore[attr-defined]


def test_model_fields_set_of_a_built_chunk_takes_a_field_as_a_validated_ones_does():
    built = new_piece_chunk("text", "a", [], None, {})
    twin = new_piece_chunk("text", "b", [], None, {})
    valid = ProcessedChunk(
        type="text", content="a", thoughts=[], serving_provider=None, metadata={}
    )
    for chunk in (valid, built):
        chunk.model_fields_set.add("error")
        assert chunk.model_dump(exclude_unset=True) == {
            "type": "text",
            "content": "a",
            "error": None,
            "thoughts": [],
            "serving_provider": None,
            "metadata": {},
        }
    assert twin.model_fields_set == {"type", "content", "thoughts", "serving_provider", "metadata"}


def test_two_threads_assigning_to_one_built_chunk_both_land_in_its_fields_set():
    """Thread B is paused inside ``_thaw`` just after it read the shared set; thread A then
    assigns in full. B must not put back a copy of the shared set that lacks A's field."""
    chunk = new_piece_chunk("text", "a", [], None, {})
    err = ProviderError(type="api_error", message="m", retryable=False)
    paused, a_done = threading.Event(), threading.Event()

    def tracer(frame, event, arg):
        if event != "call" or frame.f_code.co_name != "_thaw":
            return None
        lines = 0

        def local(frame, event, arg):
            nonlocal lines
            if event == "line":
                lines += 1
                if lines == 2 and not paused.is_set():  # the first statement has run
                    paused.set()
                    a_done.wait(1)
            return local

        return local

    def b():
        sys.settrace(tracer)
        try:
            chunk.function_call = FunctionCall(name="f")
        finally:
            sys.settrace(None)

    def a():
        paused.wait(1)
        chunk.error = err
        a_done.set()

    threads = [threading.Thread(target=b), threading.Thread(target=a)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert chunk.error is err and chunk.function_call == FunctionCall(name="f")
    assert {"error", "function_call"} <= chunk.model_fields_set
    assert set(chunk.model_dump(exclude_unset=True)) == {
        "type",
        "content",
        "error",
        "function_call",
        "thoughts",
        "serving_provider",
        "metadata",
    }
