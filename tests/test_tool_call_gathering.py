"""Streamed chat tool calls gathered under ``LabConfig.complete()``: every way a backend
sends several calls (an index each, all at index 0, no index; an id, none or ``""``; a
header then arguments, the name on every delta, each call whole in one delta, the
arguments so far on every delta) gives back the calls that were sent, in order.

The streams are generated: a call's arguments split at random points, each call in one of
the four styles. A call streamed in pieces, then the same tool with the same arguments at
its index, not both with an id, is left out: nothing on the wire tells that from the call
sent again whole (the lab reads a resend).
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from lab.config import LabConfig
from lab.replay import replay_sse

STYLES = ("header", "name_every", "whole", "cumulative")

_call = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["f", "g", "read_file"]),
        "args": st.fixed_dictionaries(
            {"x": st.integers(0, 9), "s": st.text('aé 😀"{}', max_size=6)}
        ),
        "cuts": st.lists(st.integers(1, 40), max_size=4),
        "index": st.sampled_from(["own", "zero", "none"]),
        "id": st.sampled_from(["own", "none", "empty"]),
        "style": st.sampled_from(STYLES),
        "header_alone": st.booleans(),
    }
)


def _pieces(call: dict) -> list[str]:
    args = json.dumps(call["args"], ensure_ascii=False)
    cuts = sorted({c for c in call["cuts"] if c < len(args)})
    ends = [*cuts, len(args)]
    if call["style"] == "whole":
        return [args]
    if call["style"] == "cumulative":
        return [args[:j] for j in ends]
    return [args[i:j] for i, j in zip([0, *cuts], ends, strict=True)]


def _deltas(n: int, call: dict) -> list[dict]:
    pieces = _pieces(call)
    where = {"own": {"index": n}, "zero": {"index": 0}, "none": {}}[call["index"]]
    ident = {"own": {"id": f"call_{n}"}, "none": {}, "empty": {"id": ""}}[call["id"]]
    out = []
    if call["style"] == "header" and call["header_alone"]:
        out.append({**where, **ident, "type": "function", "function": {"name": call["name"]}})
        ident = {}
        first_named = False
    else:
        first_named = True
    for k, piece in enumerate(pieces):
        fn: dict = {"arguments": piece}
        tc: dict = {**where, "function": fn}
        if (k == 0 and first_named) or call["style"] == "name_every":
            fn["name"] = call["name"]
            tc.update(ident if k == 0 else {})
        out.append(tc)
    return out


def _ambiguous(calls: list[dict]) -> bool:
    """A call of the tool and the arguments of the call before it at its wire index, that
    one streamed in pieces, where not both carry an id: the same call sent again, as far as
    the wire says."""
    last: dict[int, dict] = {}
    for n, call in enumerate(calls):
        wire = n if call["index"] == "own" else 0
        before = last.get(wire)
        if (
            before is not None
            and (before["name"], before["args"]) == (call["name"], call["args"])
            and len(_pieces(before)) >= 2  # a call sent whole, then again, is two calls
            and not before["id"] == call["id"] == "own"
        ):
            return True
        last[wire] = call
    return False


@settings(max_examples=400, deadline=None)
@given(st.lists(_call, min_size=1, max_size=3).filter(lambda cs: not _ambiguous(cs)))
def test_every_call_sent_comes_back_under_complete(calls):
    chunks = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [tc]}}]}
        for n, call in enumerate(calls)
        for tc in _deltas(n, call)
    ]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    r = replay_sse("ollama", body + b"data: [DONE]\n\n", config=LabConfig.complete())
    assert [(c.name, c.args) for c in r.function_calls] == [(c["name"], c["args"]) for c in calls]
    ids = [c.id for c in r.function_calls]
    assert ids == [f"call_{n}" if c["id"] == "own" else None for n, c in enumerate(calls)]
