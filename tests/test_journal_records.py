"""The journal's R records: one read packed alone is the same record as through the arrays,
and what a write packs reads back read for read, at the times they arrived."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lab.capture import journal as journal_mod
from lab.capture.journal import JournalWriter, bytes_record, json_record, read_journals

U32 = st.integers(0, 2**32 - 2)
T_NS = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=300, deadline=None)
@given(exchange=U32, first=U32, data=st.binary(max_size=300), t=T_NS)
def test_one_read_packed_alone_is_the_record_the_arrays_pack(exchange, first, data, t):
    alone = journal_mod.reads_record(exchange, first, [data], [t])
    arrays = journal_mod._reads_record_arrays(exchange, first, [data], [t])
    assert b"".join(alone) == b"".join(arrays)


def test_one_read_is_packed_without_the_arrays(monkeypatch):
    def arrays(*args):
        raise AssertionError("one read went through the arrays")

    monkeypatch.setattr(journal_mod, "_reads_record_arrays", arrays)
    head, data = journal_mod.reads_record(7, 3, [b"data: x\n\n"], [123])
    assert data == b"data: x\n\n" and len(head) == journal_mod.REC2.size + 20


@settings(max_examples=60, deadline=None)
@given(
    # per write, per exchange: how many new reads (0: none since the last write)
    plan=st.lists(st.lists(st.integers(0, 3), min_size=4, max_size=4), min_size=1, max_size=8),
    payload=st.binary(min_size=1, max_size=20),
)
def test_writes_of_one_and_of_several_new_reads_read_back_as_recorded(
    tmp_path_factory, plan, payload
):
    directory = tmp_path_factory.mktemp("j")
    journal = JournalWriter(directory, {"id": "t"}, {}, interval=3600, idle_interval=3600)
    lists = {k: ([], []) for k in range(4)}
    for k, (reads, ts) in lists.items():
        journal.begin(k, json_record(b"H", k, {"stream_id": f"s{k}"}), reads, ts)
        journal.append(k, bytes_record(b"B", k, b"{}"))  # the request body: H and B open it
    t = 0
    for counts in plan:
        for k, count in enumerate(counts):
            reads, ts = lists[k]
            for _ in range(count):
                t += 1
                reads.append(payload + bytes([k, t % 256]))
                ts.append(t * 1_000)
        journal.sync()
    paths = journal.paths
    got = {c.header["stream_id"]: (c.reads, c.read_t_ns, c.cut) for c in read_journals(paths)}
    journal.close()
    assert got == {f"s{k}": (reads, ts, None) for k, (reads, ts) in lists.items()}
