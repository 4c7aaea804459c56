"""One stream in the pieces every view draws it from (``lab show``, the report's stream
sections): pure, no I/O, no markup.

- :func:`request_turns` / :func:`tool_names` / :func:`request_params` – what a recorded
  request body asked, in any family's shape (OpenAI chat and Responses, Anthropic, Gemini);
- :func:`answer_pieces` / :func:`reasoning_pieces` – the answer and the reasoning split into
  ``(text, mark)`` pieces: ``"moved"`` where a leak guard moved text into the reasoning,
  ``"shown"`` where reasoning was shown as the answer before its closing tag arrived
  (:func:`lab.anomalies.shown_before_close`);
- :func:`arguments_json` – a tool call's arguments as every view prints them (indented
  JSON, never a Python repr);
- :func:`body_change` – what a degraded attempt's body changed against the first one;
- :func:`stream_flags` – what is worth a look in one stream (leak, error, degradation,
  another guard, anomalies), one short phrase each;
- :func:`notable_streams` – the streams a reader of the tables wants to open: those the
  leak, error and degradation tables name, the flagged backends' first.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lab.anomalies import detect, shown_before_close
from lab.result import StreamResult
from lab.tables import LEAK_GUARDS

__all__ = [
    "TURN_KEYS",
    "answer_pieces",
    "arguments_json",
    "body_change",
    "clip",
    "notable_streams",
    "reasoning_pieces",
    "request_params",
    "request_turns",
    "stream_flags",
    "tool_names",
]

Piece = tuple[str, str]
"""A run of text and its mark (``""``, ``"moved"`` or ``"shown"``)."""


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with ``…`` and its length said."""
    if len(text) <= limit:
        return text
    return text[: limit - 1] + f"… ({len(text):,} chars)"


def _content_text(content: Any) -> str:
    """The text of a message's content in any family's shape (a string, OpenAI content
    parts, Anthropic blocks, Gemini parts); other parts named by their type."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        if "parts" in content:
            return _content_text(content["parts"])
        if isinstance(content.get("text"), str):
            return content["text"]
        if "content" in content:
            return _content_text(content["content"])
        kind = content.get("type") or next(iter(content), "part")
        return f"[{kind}]"
    if isinstance(content, list):
        return "\n".join(t for t in (_content_text(p) for p in content) if t)
    return json.dumps(content, ensure_ascii=False)


def request_turns(body: dict[str, Any]) -> list[tuple[str, str]]:
    """``(role, text)`` for each turn of a request body, its system prompt first.

    >>> request_turns({"system": "Be brief.", "messages": [{"role": "user", "content": "Hi"}]})
    [('system', 'Be brief.'), ('user', 'Hi')]
    """
    turns: list[tuple[str, str]] = []
    for key in ("system", "instructions", "systemInstruction", "system_instruction"):
        if body.get(key):
            turns.append(("system", _content_text(body[key])))
    raw = body.get("messages", body.get("contents", body.get("input")))
    if isinstance(raw, str):
        return [*turns, ("user", raw)]
    for m in raw if isinstance(raw, list) else []:
        if not isinstance(m, dict):
            turns.append(("?", _content_text(m)))
            continue
        role = str(m.get("role") or m.get("type") or "?")
        text = _content_text(m.get("content", m.get("parts", m.get("output"))))
        calls = m.get("tool_calls")
        if isinstance(calls, list) and calls:
            names = [
                str((c.get("function") or {}).get("name", "?")) if isinstance(c, dict) else "?"
                for c in calls
            ]
            text = (text + "\n" if text else "") + "[tool calls: " + ", ".join(names) + "]"
        turns.append((role, text))
    return turns


def tool_names(body: dict[str, Any]) -> list[str]:
    """The names of the tools a request body offers, in any family's shape."""
    names: list[str] = []
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if isinstance(tool.get("function"), dict):  # OpenAI chat
            names.append(str(tool["function"].get("name", "?")))
        elif "functionDeclarations" in tool or "function_declarations" in tool:  # Gemini
            decls = tool.get("functionDeclarations") or tool.get("function_declarations") or []
            names.extend(str(d.get("name", "?")) for d in decls if isinstance(d, dict))
        else:  # Anthropic, the Responses API, built-in tools
            names.append(str(tool.get("name") or tool.get("type") or "?"))
    return names


TURN_KEYS = frozenset(
    {
        "model",
        "messages",
        "contents",
        "input",
        "tools",
        "system",
        "instructions",
        "systemInstruction",
        "system_instruction",
    }
)
"""Request keys :func:`request_turns`, :func:`tool_names` and the model line show."""


def request_params(body: dict[str, Any], limit: int = 60) -> list[str]:
    """The request's other keys as ``key=JSON`` (each value cut to ``limit`` characters)."""
    return [
        f"{k}={clip(json.dumps(v, ensure_ascii=False), limit)}"
        for k, v in body.items()
        if k not in TURN_KEYS
    ]


def _marked(text: str, pieces: Sequence[str], mark: str) -> list[Piece]:
    """``text`` split so that each of ``pieces`` (found in order) carries ``mark``;
    adjacent marked pieces are one."""
    out: list[Piece] = []
    pos = 0
    for piece in pieces:
        at = text.find(piece, pos) if piece else -1
        if at < 0:
            continue
        if at == pos and out and out[-1][1] == mark:
            out[-1] = (out[-1][0] + piece, mark)
        else:
            out += [(text[pos:at], ""), (piece, mark)]
        pos = at + len(piece)
    out.append((text[pos:], ""))
    return [(t, m) for t, m in out if t]


def reasoning_pieces(result: StreamResult) -> list[Piece]:
    """The reasoning with the text leak guards moved into it marked ``"moved"``."""
    moved = [e.moved for e in result.guard_events if e.guard in LEAK_GUARDS and e.moved]
    return _marked(result.reasoning, moved, "moved")


def answer_pieces(result: StreamResult) -> list[Piece]:
    """The answer with the reasoning it showed before the closing tag arrived (the part a
    guard could no longer take back) marked ``"shown"``."""
    partial = shown_before_close(result)
    lead = partial[0][0] if partial else ""
    if lead and result.text.startswith(lead):
        return [(lead, "shown"), *([(result.text[len(lead) :], "")] if result.text != lead else [])]
    return [(result.text, "")] if result.text else []


def arguments_json(args: Any) -> str:
    """A tool call's arguments as every view prints them: JSON indented by 2, non-ASCII
    kept, in the order the model wrote them (never Python's repr: ``true``, ``null``,
    double quotes).

    >>> print(arguments_json({"city": "Zürich", "days": 2, "metric": True, "note": None}))
    {
      "city": "Zürich",
      "days": 2,
      "metric": true,
      "note": null
    }
    """
    return json.dumps(args, ensure_ascii=False, indent=2, default=str)


def body_change(first: bytes, later: bytes) -> str:
    """What a degraded attempt's body changed against the first one, by top-level key.

    >>> body_change(b'{"model": "m", "min_p": 0.1}', b'{"model": "m"}')
    'without: min_p'
    """
    try:
        a, b = json.loads(first), json.loads(later)
    except ValueError:
        return "a body that is not JSON"
    if not isinstance(a, dict) or not isinstance(b, dict):
        return "another body" if a != b else "the same body"
    dropped = [k for k in a if k not in b]
    added = [k for k in b if k not in a]
    changed = [
        f"{k}={clip(json.dumps(b[k], ensure_ascii=False), 40)}"
        for k in a
        if k in b and a[k] != b[k]
    ]
    parts = [
        f"{what}: {', '.join(keys)}"
        for what, keys in (("without", dropped), ("with", added), ("changed", changed))
        if keys
    ]
    return "; ".join(parts) if parts else "the same body"


def stream_flags(result: StreamResult, *, anomalies: bool = True) -> list[str]:
    """What is worth a look in ``result``: ``leaked (think_stripper)``, ``error
    provider_overloaded``, ``degraded default>targeted_drop_min_p``, ``guard json_repair``
    (another guard acted) and, with ``anomalies``, ``anomaly NAME`` for each detector that
    fired (:func:`lab.anomalies.detect`). Empty for a clean stream."""
    why: list[str] = []
    leak = sorted({e.guard for e in result.guard_events if e.guard in LEAK_GUARDS})
    if leak:
        why.append(f"leaked ({', '.join(leak)})")
    if result.error is not None:
        why.append(f"error {result.error.type}")
    if len(result.attempts) > 1:
        why.append(f"degraded {result.degradation_path}")
    others = sorted({e.guard for e in result.guard_events if e.guard not in LEAK_GUARDS})
    if others:
        why.append(f"guard {', '.join(others)}")
    if anomalies:
        why += [f"anomaly {name}" for name in detect(result)]
    return why


def notable_streams(
    results: Sequence[StreamResult], flagged: Sequence[str] = ()
) -> list[tuple[StreamResult, list[str]]]:
    """The streams the leak, error and degradation tables name, each with why (``leaked
    (think_stripper)``, ``error provider_overloaded``, ``degraded default>...``,
    ``guard json_repair``): the streams of the ``flagged`` backends (the scorecard's WORSE
    ones) first, then those a guard acted on (the leak table's), the errored and the
    degraded, each in result order."""
    out: list[tuple[int, int, StreamResult, list[str]]] = []
    for i, r in enumerate(results):
        why = stream_flags(r, anomalies=False)
        if why:
            backend = r.serving_provider or f"{r.provider} (direct)"
            if backend in flagged:
                rank = 0
            else:
                acted = bool(r.guard_events)  # the leak table names it
                rank = 1 if acted else 2 if r.error is not None else 3
            out.append((rank, i, r, why))
    out.sort(key=lambda x: (x[0], x[1]))
    return [(r, why) for _, _, r, why in out]
