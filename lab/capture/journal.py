"""The in-flight journal: one small append-only binary file per exchange being recorded.

Each record is ``type (1 byte) | payload length (uint32 LE) | payload``:

- ``H``: JSON header (capture info, redaction policy, the redacted request, started_at)
  immediately followed by ``B``: the (redacted) request body bytes;
- ``S``: JSON response line (status, redacted headers, http_version, t_headers_ns);
- ``D``: one network read: ``t_ns`` (int64 LE) then the raw bytes;
- ``E``: JSON end record (end_reason, error, t_end_ns).

Records are written unbuffered, one ``write`` per record, so a recorder killed with SIGKILL
leaves at most a torn final record, which ``read_journal`` ignores. A journal without an
``E`` record is an exchange the recorder never finished: the reader reports it with
end_reason ``"incomplete"``.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["JOURNAL_SUFFIX", "JournalContents", "encode_json_record", "read_journal"]

JOURNAL_SUFFIX = ".journal"

REC = struct.Struct("<cI")  # type, payload length
READ_REC = struct.Struct("<cIq")  # b"D", payload length (8 + n), t_ns


def encode_json_record(kind: bytes, obj: dict[str, Any]) -> bytes:
    payload = json.dumps(obj, ensure_ascii=False).encode("utf-8")
    return REC.pack(kind, len(payload)) + payload


def encode_bytes_record(kind: bytes, payload: bytes) -> bytes:
    return REC.pack(kind, len(payload)) + payload


@dataclass
class JournalContents:
    header: dict[str, Any]
    body: bytes
    response: dict[str, Any] | None = None
    reads: list[bytes] = field(default_factory=list)
    read_t_ns: list[int] = field(default_factory=list)
    end: dict[str, Any] | None = None
    torn_tail: bool = False


def read_journal(path: Path) -> JournalContents | None:
    """Parse a journal; None when not even the header made it to disk."""
    data = path.read_bytes()
    pos, n = 0, len(data)
    out: JournalContents | None = None
    header: dict[str, Any] | None = None
    while pos + REC.size <= n:
        kind, length = REC.unpack_from(data, pos)
        start = pos + REC.size
        end = start + length
        if end > n:
            break
        payload = data[start:end]
        pos = end
        if kind == b"H":
            try:
                header = json.loads(payload)
            except ValueError:
                return None
        elif kind == b"B":
            if header is None:
                return None
            out = JournalContents(header=header, body=payload)
        elif out is None:
            return None
        elif kind == b"D":
            (t_ns,) = struct.unpack_from("<q", payload, 0)
            out.reads.append(payload[8:])
            out.read_t_ns.append(t_ns)
        elif kind == b"S":
            out.response = json.loads(payload)
        elif kind == b"E":
            out.end = json.loads(payload)
    if out is not None and pos != n:
        out.torn_tail = True
    return out
