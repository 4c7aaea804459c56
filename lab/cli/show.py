"""``lab show``: one stream, replayed through the full stack and read in a terminal.

What it prints, in order: a header (stream, recording, family, model, serving backend, how
it ended), the request (model, the messages cut to :data:`MESSAGE_CHARS` each with the
middle of a long conversation left out, the tools by name, the other parameters), the error
if any, the answer beside the reasoning with the text the guards moved marked, the tool
calls as indented JSON, the guard events (where: attempt, event, offset, characters moved),
the degradation attempts, usage, the anomalies and what each means, the timing from the
recorded reads (:func:`lab.latency.stream_timing`) and replay divergence. ``--raw`` adds the
recorded reads of every attempt (seq, arrival ms, bytes, the bytes escaped).

Terminal-safe: model and provider text goes through :func:`lab.console.displayable` (no
ESC, no carriage return, no bidirectional control reaches the terminal; each shows as a
visible escape), tabs become spaces and every line is wrapped to the width in terminal
cells (wide characters count two), so no line is wider than ``--columns``. Colour (bold
headings, moved text highlighted) only on a terminal, never when ``NO_COLOR`` is set;
without it the marked text is bracketed ``[[like this]]``.

The stream is named by its id or by a prefix of it that only one stream has; an unknown or
ambiguous id is a usage error naming the closest ids. PATH may also be a fixture directory
(``tests/fixtures/NAME``: its stream by default) or a raw response body file (needs
``--provider``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.cli.common import CONFIG_HELP, UsageError, open_loaded, providers, table_view

# pandas, the analysis modules (lab.reading, lab.anomalies, lab.latency) and replay are
# imported inside the functions that use them: `lab --help` builds this parser too.

MESSAGE_CHARS = 300
"""A request message longer than this is cut (``…``) and its length said."""
MESSAGES_SHOWN = 6
"""A conversation with more messages shows its first and its last ``MESSAGES_SHOWN - 1``."""
MARK_OPEN, MARK_CLOSE = "[[", "]]"
"""How marked text is shown without colour."""

_SGR = {
    "bold": "\x1b[1m",
    "moved": "\x1b[30;43m",
    "shown": "\x1b[4m",
    "dim": "\x1b[2m",
}
_RESET = "\x1b[0m"


# -- terminal text ------------------------------------------------------------------------


def cells(text: str) -> int:
    """Terminal cells ``text`` takes: two for a wide or full-width character, none for a
    combining mark or a zero-width format character, one otherwise."""
    n = 0
    for ch in text:
        if ch.isascii():
            n += 1
        elif unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        elif unicodedata.east_asian_width(ch) in ("W", "F"):
            n += 2
        else:
            n += 1
    return n


def safe(text: str) -> str:
    """Model or provider text ready to print: CRLF as a line break, every other control
    character (a lone CR, ESC, C1, bidirectional controls) a visible escape, tabs as four
    spaces."""
    from lab.console import displayable

    return displayable(text.replace("\r\n", "\n")).replace("\t", "    ")


# A styled line: its text and, per character, the style name ("" for none).
Styled = tuple[str, list[str]]


def _spans(pieces: list[tuple[str, str]], colour: bool) -> Styled:
    """Marked pieces ``(text, style)`` as one styled string; without colour each marked
    piece is bracketed instead."""
    text: list[str] = []
    styles: list[str] = []
    for piece, style in pieces:
        shown = safe(piece)
        if style and not colour:
            shown = MARK_OPEN + shown + MARK_CLOSE
            style = ""
        text.append(shown)
        styles.extend([style] * len(shown))
    return "".join(text), styles


def wrap(styled: Styled, width: int, words: bool = True) -> list[Styled]:
    """``styled`` split at its line breaks and wrapped to ``width`` cells: at the last
    space that fits, else inside the word (``words=False``: always at the width, every
    character kept, for raw bytes)."""
    text, styles = styled
    out: list[Styled] = []
    start = 0
    for line in text.split("\n"):
        end = start + len(line)
        out.extend(_wrap_line(line, styles[start:end], width, words))
        start = end + 1
    return out


def _wrap_line(line: str, styles: list[str], width: int, words: bool) -> list[Styled]:
    if not line:
        return [("", [])]
    out: list[Styled] = []
    begin, used, space = 0, 0, -1
    i = 0
    while i < len(line):
        w = cells(line[i])
        if used + w > width and i > begin:
            cut = space + 1 if words and space > begin else i
            kept = line[begin:cut]
            out.append((kept.rstrip(" ") if words else kept, styles[begin:cut]))
            begin, space = cut, -1
            used = cells(line[begin:i])
            continue
        if line[i] == " ":
            space = i
        used += w
        i += 1
    out.append((line[begin:], styles[begin:]))
    return [(t, s[: len(t)]) for t, s in out]


def _paint(styled: Styled, colour: bool) -> str:
    text, styles = styled
    if not colour or not any(styles):
        return text
    out: list[str] = []
    current = ""
    for ch, style in zip(text, styles, strict=False):
        if style != current:
            out.append(_RESET if current else "")
            out.append(_SGR[style] if style else "")
            current = style
        out.append(ch)
    if current:
        out.append(_RESET)
    return "".join(out)


def _pad(styled: Styled, width: int) -> Styled:
    text, styles = styled
    fill = max(0, width - cells(text))
    return text + " " * fill, styles + [""] * fill


@dataclass
class Page:
    """Lines of output no wider than ``width`` cells, coloured or not."""

    width: int
    colour: bool

    def __post_init__(self) -> None:
        self.lines: list[str] = []

    def text(self, text: str, style: str = "", indent: int = 0) -> None:
        """Our text (model text in it already :func:`safe`), wrapped, indented by ``indent``."""
        shown = safe(text)
        self.styled((shown, [style if self.colour else ""] * len(shown)), indent)

    def styled(self, styled: Styled, indent: int = 0) -> None:
        for line in wrap(styled, max(self.width - indent, 8)):
            self.lines.append(" " * indent + _paint(line, self.colour))

    def heading(self, title: str) -> None:
        self.lines.append("")
        self.text(f"-- {title} --", "bold" if self.colour else "")

    def blank(self) -> None:
        self.lines.append("")

    def columns(self, left: Styled, right: Styled) -> None:
        """Two texts side by side, each in half the width, ``|`` between them."""
        half = (self.width - 3) // 2
        a, b = wrap(left, half), wrap(right, half)
        a += [("", [])] * (len(b) - len(a))
        b += [("", [])] * (len(a) - len(b))
        for x, y in zip(a, b, strict=True):
            line = _paint(_pad(x, half), self.colour) + " | " + _paint(y, self.colour)
            self.lines.append(line.rstrip(" "))

    def table(self, df: Any) -> None:
        from lab.console import table_text

        text, left_out = table_text(df, self.width)
        for line in text.splitlines():
            self.lines.append(safe(line))
        if left_out:
            self.text(f"(left out to fit {self.width} columns: {', '.join(left_out)})")


def _ms(value: float | None) -> str:
    from lab.console import MISSING

    return MISSING if value is None else f"{value:.1f} ms"


# -- the request ---------------------------------------------------------------------------


def _request(page: Page, body_bytes: bytes | None, model: str | None) -> None:
    from lab.reading import clip, request_params, request_turns, tool_names

    page.heading("request")
    if not body_bytes:
        page.text("(a raw response body: no request was recorded)")
        return
    try:
        body = json.loads(body_bytes)
    except ValueError:
        page.text(f"(not JSON: {len(body_bytes):,} bytes)")
        return
    if not isinstance(body, dict):
        page.text(safe(clip(json.dumps(body, ensure_ascii=False), MESSAGE_CHARS)))
        return
    page.text(f"model: {safe(str(body.get('model') or model or '—'))}")
    turns = request_turns(body)
    page.text(f"messages ({len(turns)}):")
    shown: list[tuple[str, str] | None] = list(turns)
    if len(turns) > MESSAGES_SHOWN:
        shown = [turns[0], None, *turns[-(MESSAGES_SHOWN - 1) :]]
    for turn in shown:
        if turn is None:
            left = len(turns) - MESSAGES_SHOWN
            page.text(f"… {left} more message{'' if left == 1 else 's'} …", indent=2)
            continue
        role, text = turn
        page.text(f"{safe(role)}: {safe(clip(text, MESSAGE_CHARS))}", indent=2)
    names = tool_names(body)
    if names:
        page.text(f"tools ({len(names)}): {safe(', '.join(names))}")
    params = request_params(body)
    if params:
        page.text("parameters: " + safe(" ".join(params)), indent=0)


# -- the stream ----------------------------------------------------------------------------


def _answer(page: Page, r: Any) -> None:
    from lab.anomalies import shown_before_close
    from lab.reading import answer_pieces, reasoning_pieces

    partial = shown_before_close(r)
    answer = answer_pieces(r)
    reasoning = reasoning_pieces(r)
    lead = any(m for _, m in answer)
    moved = any(m for _, m in reasoning)
    mark = "highlighted" if page.colour else f"{MARK_OPEN} {MARK_CLOSE}"
    a_title = f"answer ({len(r.text):,} chars)"
    if lead:
        a_title += f"; {mark}: shown before the closing tag"
    b_title = f"reasoning ({len(r.reasoning):,} chars)"
    if moved:
        b_title += f"; {mark}: moved by a guard"
    if partial:
        shown, tail = partial[0]
        page.blank()
        page.text(
            f"cleaned only in part: the closing reasoning tag arrived after {len(shown):,} "
            f"chars of reasoning had been shown as the answer; the guard moved only what "
            f"followed ({len(tail):,} chars)."
        )
    page.heading("answer | reasoning")
    if page.width >= 60:
        page.columns(_spans([(a_title, "")], False), _spans([(b_title, "")], False))
        half = (page.width - 3) // 2
        page.lines.append("-" * half + "-+-" + "-" * half)
        page.columns(_spans(answer, page.colour), _spans(reasoning, page.colour))
    else:  # too narrow for two columns: one after the other
        page.text(a_title)
        page.styled(_spans(answer, page.colour), indent=2)
        page.text(b_title)
        page.styled(_spans(reasoning, page.colour), indent=2)


def _tool_calls(page: Page, r: Any) -> None:
    from lab.reading import arguments_json, clip

    if not r.function_calls:
        return
    page.heading(f"tool calls ({len(r.function_calls)})")
    for f in r.function_calls:
        head = f"{safe(f.name)}" + (f"  id {safe(f.id)}" if f.id else "")
        if f.arguments_truncated:
            head += "  (arguments cut short by the stream, repaired: nothing invented)"
        page.text(head)
        page.text(safe(arguments_json(f.args)), indent=2)
        raw = (f.provider_fields or {}).get("raw_arguments")
        if isinstance(raw, str) and raw:
            page.text("raw arguments (did not parse): " + safe(clip(raw, 500)), indent=2)


def _events(page: Page, r: Any) -> None:
    import pandas as pd

    page.heading(f"guard events ({len(r.guard_events)})")
    if not r.guard_events:
        page.text("none")
        return
    rows = [
        {
            "guard": e.guard,
            "rule": e.detail.get("rule"),
            "attempt": e.attempt,
            "seq": e.seq,
            "offset": e.offset,
            "moved_chars": len(e.moved),
            "moved": e.moved,
        }
        for e in r.guard_events
    ]
    page.table(pd.DataFrame(rows))


def _attempts(page: Page, r: Any, request: Any) -> None:
    import pandas as pd

    from lab.reading import body_change

    page.heading(f"attempts ({len(r.attempts)})")
    if not r.attempts:
        page.text("none")
        return
    rows = [
        {
            "attempt": a.attempt,
            "label": a.label,
            "status": a.status,
            "ended": a.end_reason,
            "reads": a.n_reads,
            "degradable": a.degradable,
            "error": a.error,
        }
        for a in r.attempts
    ]
    page.table(pd.DataFrame(rows))
    for a in r.attempts:
        if a.error and len(a.error) > 32:
            page.text(f"attempt {a.attempt} error: {safe(a.error)}")
    exchanges = request.exchanges if request is not None else []
    for ex in exchanges[1:]:
        change = body_change(exchanges[0].request_body, ex.request_body)
        page.text(f"attempt {ex.attempt} ({safe(ex.attempt_label)}) sent {safe(change)}")


def _usage(page: Page, r: Any) -> None:
    from lab.console import format_cost

    page.heading("usage")
    u = r.usage
    if u is None:
        page.text("none (the stream reported none)")
        return
    page.text(
        f"input {u.input_tokens} · output {u.output_tokens} · reasoning {u.reasoning_tokens} "
        f"· cache read {u.cache_read_tokens} · cache write {u.cache_write_tokens} "
        f"· cost {format_cost(r.cost)}"
    )


def _anomalies(page: Page, r: Any) -> None:
    from lab.anomalies import detect, explain

    found = detect(r)
    page.heading(f"anomalies ({len(found)})")
    if not found:
        page.text("none")
    for name in found:
        page.text(f"{name}: {explain(name)}", indent=2)


def _timing(page: Page, r: Any, stall_s: float) -> None:
    from lab.latency import stream_timing

    t = stream_timing(r, stall_s=stall_s)
    page.heading("timing (ms after the request of the final attempt was sent)")
    if not t.timed:
        page.text("untimed: no arrival times were recorded for its reads")
        return
    page.text(
        f"first byte {_ms(t.ttfb_ms)} · first token {_ms(r.ttft_ms)} · first visible "
        f"{_ms(t.ttft_content_ms)} · first reasoning {_ms(t.ttft_reasoning_ms)}"
    )
    chars = "—" if t.first_chunk_chars is None else f"{t.first_chunk_chars:,}"
    page.text(f"content reads {t.content_reads} · chars in the first content read {chars}")
    if t.gap_max_ms is not None:
        page.text(
            f"gaps between content reads: p50 {_ms(t.gap_p50_ms)} · p90 {_ms(t.gap_p90_ms)} "
            f"· p99 {_ms(t.gap_p99_ms)} · max {_ms(t.gap_max_ms)}"
        )
    page.text(f"stalls (gaps over {stall_s:g} s): {t.stalls} ({_ms(t.stall_ms)})")


def _raw(page: Page, request: Any, limit: int | None) -> None:
    for ex in request.exchanges:
        n_bytes = sum(map(len, ex.reads))
        page.heading(
            f"reads of attempt {ex.attempt} ({safe(ex.attempt_label)}): {len(ex.reads)} "
            f"read{'' if len(ex.reads) == 1 else 's'}, "
            f"{n_bytes:,} bytes, status {ex.status if ex.status is not None else '—'}, "
            f"ended {safe(ex.end_reason)}"
        )
        times = list(ex.read_t_ns) if ex.read_t_ns is not None else []
        shown = ex.reads if limit is None else ex.reads[:limit]
        seq_w = len(str(max(len(ex.reads) - 1, 0)))
        for seq, data in enumerate(shown):
            t = f"{times[seq] / 1e6:9.1f} ms" if seq < len(times) else f"{'—':>9} ms"
            head = f"{seq:>{seq_w}} {t} {len(data):>6} B  "
            text = data.decode("utf-8", "backslashreplace")
            escaped = safe(text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t"))
            indent = cells(head)
            lines = wrap((escaped, [""] * len(escaped)), max(page.width - indent, 8), False)
            page.lines.append(head + lines[0][0])
            page.lines.extend(" " * indent + line for line, _ in lines[1:])
        if limit is not None and len(ex.reads) > limit:
            page.text(f"… {len(ex.reads) - limit} more reads (--all or --limit N shows them)")


def render_stream(
    r: Any,
    request: Any = None,
    *,
    width: int = 100,
    colour: bool = False,
    raw: bool = False,
    limit: int | None = 40,
    stall_s: float = 2.0,
) -> str:
    """Stream ``r`` (a :class:`~lab.result.StreamResult`; ``request`` its
    :class:`~lab.capture.RecordedRequest`, None for a raw body) as terminal text, every line
    at most ``width`` cells."""
    from lab.console import MISSING

    page = Page(width=max(width, 20), colour=colour)
    backend = r.serving_provider or f"{r.provider} (direct)"
    page.text(f"stream {safe(r.stream_id)}", "bold" if colour else "")
    where = f"recording {safe(r.capture_id)} · " if r.capture_id else ""
    status = "error" if r.error is not None else (r.finish_reason or MISSING)
    started = f" · started {r.started_at:%Y-%m-%d %H:%M:%S} UTC" if r.started_at else ""
    page.text(
        f"{where}{safe(r.provider)} · model {safe(str(r.model or MISSING))} · served by "
        f"{safe(backend)} · finish {safe(status)} · outcome {safe(str(r.outcome or MISSING))}"
        f"{started}"
    )
    first = request.exchanges[0] if request is not None and request.exchanges else None
    _request(page, first.request_body if first is not None else None, r.model)
    if r.error is not None:
        e = r.error
        cls = f", classifier {r.classifier}" if r.classifier else ""
        page.heading("error")
        known = e.status is not None and str(e.status) != e.code
        status_part = f", status {e.status}" if known else ""
        page.text(
            safe(
                f"{e.type} ({e.code}{status_part}{', retryable' if e.retryable else ''}{cls}): "
                f"{e.message}"
            )
        )
        from lab.tables import safety_text

        safety = safety_text(r.facts.get("safety_ratings"))
        if safety:
            page.text(safe(f"safety: {safety}"))
    _answer(page, r)
    _tool_calls(page, r)
    _events(page, r)
    _attempts(page, r, request)
    _usage(page, r)
    _anomalies(page, r)
    _timing(page, r, stall_s)
    if r.divergence:
        page.heading("replay divergence")
        for d in r.divergence:
            page.text(safe(d), indent=2)
    if raw and request is not None:
        _raw(page, request, limit)
    return "\n".join(page.lines) + "\n"


# -- finding the stream --------------------------------------------------------------------


def _listing(ids: list[str], limit: int = 5) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def pick_stream(known: list[str], wanted: str) -> str:
    """The one id of ``known`` that is ``wanted`` or starts with it; a :class:`UsageError`
    naming the candidates (ambiguous) or the closest ids (unknown) otherwise."""
    import difflib

    from lab.console import displayable

    if wanted in known:
        return wanted
    matches = sorted(s for s in set(known) if s.startswith(wanted))
    if len(matches) == 1:
        return matches[0]
    shown = displayable(repr(wanted))
    if matches:
        raise UsageError(
            f"stream id {shown} is ambiguous: {len(matches)} streams start with it: "
            f"{_listing(matches)}"
        )
    ids = sorted(set(known))

    def closeness(candidate: str) -> tuple[int, float]:
        prefix = len(os.path.commonprefix([wanted, candidate]))
        return prefix, difflib.SequenceMatcher(None, wanted, candidate).ratio()

    scored = sorted(((closeness(c), c) for c in ids), key=lambda x: (-x[0][0], -x[0][1], x[1]))
    close = [c for (prefix, ratio), c in scored[:5] if prefix >= 3 or ratio >= 0.5]
    hint = f"; close matches: {', '.join(close)}" if close else f"; e.g. {_listing(ids, 3)}"
    raise UsageError(f"no stream {shown} among {len(set(known))} streams{hint}")


def _from_capture(path: str, wanted: str | None, config: Any) -> tuple[Any, Any]:
    from lab.replay import replay_request

    capture = open_loaded(path, say=False)
    table = capture.streams_table
    ids = table["stream_id"].to_pylist()
    if wanted is None:
        if len(set(ids)) != 1:
            raise UsageError(
                f"{path} holds {len(set(ids))} streams: name one (e.g. {_listing(sorted(set(ids)), 3)})"
            )
        wanted = ids[0]
    sid = pick_stream(ids, wanted)
    capture_ids = table["capture_id"].to_pylist()
    plan = [g for g in capture.request_plan() if ids[g[0]] == sid]
    if len(plan) > 1:
        recordings = ", ".join(sorted({str(capture_ids[g[0]]) for g in plan}))
        raise UsageError(
            f"stream {sid} is in several recordings ({recordings}): name one recording directory"
        )
    request = capture.requests_at(plan)[0]
    return replay_request(request, config=config), request


def _from_body(path: Path, provider: str | None, config: Any) -> tuple[Any, Any]:
    if provider is None:
        raise UsageError(
            f"{path} is a raw response body: say whose with --provider "
            f"(one of: {', '.join(providers())})"
        )
    return replay_body(provider, path.read_bytes(), config=config, name=path.name)


def replay_body(
    provider: str, body: bytes, *, config: Any = None, name: str = "body"
) -> tuple[Any, Any]:
    """``(result, request)`` of a raw response body: replayed as one read, untimed (the
    replay's own clock says nothing of the provider), with a request record that holds only
    that read (no request body)."""
    from lab.capture import RecordedExchange, RecordedRequest
    from lab.replay import replay_sse

    result = replay_sse(provider, body, config=config, stream_id=name)
    result.read_t_ns = {attempt: [] for attempt in result.read_t_ns}
    read = RecordedExchange(
        stream_id=name,
        attempt=0,
        attempt_label="body",
        provider=provider,
        model=None,
        method="POST",
        url="",
        request_headers={},
        request_body=b"",
        status=None,
        http_version=None,
        response_headers={},
        reads=[body],
        read_t_ns=[],
        end_reason="eof",
        error=None,
    )
    return result, RecordedRequest(name, provider, None, [read])


def load_stream(
    path: str, wanted: str | None, config: Any, provider: str | None = None
) -> tuple[Any, Any]:
    """``(result, recorded request)`` of stream ``wanted`` at ``path``: a capture, a fixture
    directory (its ``capture/``; its own stream when ``wanted`` is None) or a raw body
    file (the request is then None)."""
    p = Path(path)
    fixture = p / "fixture.json"
    if p.is_dir() and fixture.is_file() and (p / "capture").is_dir():
        if wanted is None:
            try:
                wanted = json.loads(fixture.read_text(encoding="utf-8")).get("stream_id")
            except ValueError as exc:
                raise UsageError(f"{fixture}: not JSON ({exc})") from None
        return _from_capture(str(p / "capture"), wanted, config)
    if p.is_file() and not p.name.endswith((".parquet", ".journal")):
        return _from_body(p, provider, config)
    return _from_capture(path, wanted, config)


def use_colour(choice: str, stream: Any = None) -> bool:
    """``--color``: always, never, or auto (a terminal, and ``NO_COLOR`` unset or empty)."""
    if choice != "auto":
        return choice == "always"
    stream = stream or sys.stdout
    return bool(stream.isatty()) and not os.environ.get("NO_COLOR")


def run(args: argparse.Namespace) -> int:
    from lab.console import load_config

    if args.provider is not None and args.provider not in providers():
        raise UsageError(f"--provider {args.provider}: unknown; one of: {', '.join(providers())}")
    config = load_config(args.config)
    result, request = load_stream(args.path, args.stream_id, config, args.provider)
    view = table_view(args)
    sys.stdout.write(
        render_stream(
            result,
            request,
            width=view.width,
            colour=use_colour(args.color),
            raw=args.raw,
            limit=view.limit,
            stall_s=config.stall_s,
        )
    )
    return 0


def add_parser(sub: Any, tv: argparse.ArgumentParser) -> None:
    """Add ``lab show`` to ``sub`` (``tv``: the table options parent parser)."""
    sp = sub.add_parser(
        "show",
        parents=[tv],
        help="one stream: request, answer beside reasoning, guards, attempts, timing",
        description="Replay one stream through the full stack and print it: the request, "
        "the answer beside the reasoning with the text the guards moved marked, tool calls "
        "as JSON, guard events, degradation attempts, usage, anomalies and timing. Model "
        "text is shown terminal-safe (control characters and escape sequences as visible "
        "escapes).",
    )
    sp.add_argument(
        "path",
        help="a recording directory, a root of recordings, a .parquet or a glob; or a "
        "fixture directory; or a raw response body file (with --provider)",
    )
    sp.add_argument(
        "stream_id",
        nargs="?",
        default=None,
        help="the stream's id or a prefix only it has (default: the fixture's stream, or "
        "the only stream of PATH)",
    )
    sp.add_argument(
        "--raw",
        action="store_true",
        help="also print the recorded reads of every attempt: seq, arrival ms, bytes, the "
        "bytes escaped (--limit N per attempt, --all for every read; default: off)",
    )
    sp.add_argument("--config", default=None, help=CONFIG_HELP)
    sp.add_argument(
        "--provider",
        default=None,
        help="for a raw body file: the family that sent it (default: none, required for a "
        "body file), one of: " + ", ".join(providers()),
    )
    sp.add_argument(
        "--color",
        choices=["auto", "always", "never"],
        default="auto",
        help="colour the headings and the marked text: auto (on a terminal, unless NO_COLOR "
        "is set), always or never (default: auto)",
    )
    sp.set_defaults(func=run)
