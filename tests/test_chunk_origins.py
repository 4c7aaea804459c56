"""A result's origins read as a list of ChunkOrigin, however they are stored."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.result import ChunkOrigin, ChunkOrigins, StreamResult

triples = st.lists(
    st.tuples(st.integers(0, 9), st.integers(-1, 2**40), st.integers(-1, 2**40)).map(
        lambda t: ChunkOrigin(*t)
    ),
    max_size=20,
)


@given(triples)
def test_origins_read_as_the_list_of_chunk_origins_they_were_given(given_origins):
    origins = ChunkOrigins(given_origins)
    assert len(origins) == len(given_origins)
    assert list(origins) == given_origins
    assert origins == given_origins and given_origins == origins
    assert all(type(o) is ChunkOrigin for o in origins)
    assert [origins[i] for i in range(len(origins))] == given_origins
    assert [origins[-i] for i in range(1, len(origins) + 1)] == given_origins[::-1]
    assert origins[1:4] == given_origins[1:4] and origins[::-2] == given_origins[::-2]
    back = pickle.loads(pickle.dumps(origins))
    assert type(back) is ChunkOrigins and back == origins and list(back) == given_origins


def test_an_index_past_either_end_raises_index_error():
    origins = ChunkOrigins([ChunkOrigin(0, 1, 2)])
    assert origins[0].read_seq == 2 and origins[-1].event == 1
    with pytest.raises(IndexError):
        origins[1]
    with pytest.raises(IndexError):
        origins[-2]


def test_the_per_event_path_notes_one_origin_per_chunk_of_the_event():
    origins = ChunkOrigins()
    note = origins.extend_flat()
    note((0, 3, 1))
    note((1, 4, 2) * 2)  # an event that gave two chunks
    origins.append(ChunkOrigin(1, 5, 2))
    assert origins == [(0, 3, 1), (1, 4, 2), (1, 4, 2), (1, 5, 2)]
    assert repr(origins) == (
        "ChunkOrigins([ChunkOrigin(attempt=0, event=3, read_seq=1), "
        "ChunkOrigin(attempt=1, event=4, read_seq=2), "
        "ChunkOrigin(attempt=1, event=4, read_seq=2), "
        "ChunkOrigin(attempt=1, event=5, read_seq=2)])"
    )


def test_origins_differ_from_a_list_of_other_origins_or_another_length():
    origins = ChunkOrigins([ChunkOrigin(0, 1, 2)])
    assert origins != [ChunkOrigin(0, 1, 3)]
    assert origins != [] and origins != [ChunkOrigin(0, 1, 2)] * 2
    assert origins != ChunkOrigins()
    assert origins != "not origins"


def test_a_result_starts_with_empty_origins_of_its_own():
    a, b = StreamResult(stream_id="a", provider="p"), StreamResult(stream_id="b", provider="p")
    a.origins.append(ChunkOrigin(0, 0, 0))  # type: ignore[attr-defined]
    assert len(b.origins) == 0 and b.origins == []
