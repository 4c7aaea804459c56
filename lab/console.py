"""What the command line prints: tables that fit the terminal, and a commented example config.

- :func:`render` – a DataFrame as a ``table`` that fits ``width`` columns (long cells cut
  with ``…``, columns that still do not fit left out and named), or as ``markdown``, ``csv``
  or ``json``. One missing-value marker, :data:`MISSING`, in tables and markdown;
  csv leaves the cell empty and json writes ``null``.
- :data:`MISSING`, :data:`DECIMALS`, :func:`format_cost`, :func:`format_rate` – the number
  formats every table view and sentence of the lab uses, defined in :mod:`lab.numbers` (the
  lowest layer, so the analysis sentences use them too) and re-exported here.
- :func:`displayable` – text from a model or provider made safe to print on a terminal:
  every control character but newline and tab shown as a visible ``\\xNN`` escape.
- :func:`config_example` – every :class:`~lab.config.LabConfig` field at its default, each
  after a ``//`` comment line from its docstring; :func:`load_config` reads such a file back
  (``//`` lines removed, then :meth:`LabConfig.coerce`).
"""

from __future__ import annotations

import io
import json
import math
import re
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lab.config import ConfigError, LabConfig, field_docs
from lab.guards.spill import SpillGuardConfig
from lab.numbers import DECIMALS, MISSING, format_cost, format_rate

if TYPE_CHECKING:  # pandas is imported where it is used: `lab --help` stays fast
    import pandas as pd

__all__ = [
    "DECIMALS",
    "FORMATS",
    "MISSING",
    "config_example",
    "displayable",
    "format_cost",
    "format_rate",
    "load_config",
    "render",
    "strip_comments",
]

FORMATS = ("table", "markdown", "csv", "json")
"""What ``--format`` accepts."""

CELL_MAX = 32
"""A table cell longer than this is cut (``…``) before the table is fitted to the width."""
CELL_MIN = 12
"""Fitting to the width never cuts a column narrower than this (or its header), and never
cuts the first column (the row's id): it leaves columns out from the right instead."""
GAP = "  "


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 controls but tab and newline, DEL, C1 controls (``\\x9b`` is a one-byte CSI), and the
bidirectional controls (marks, embeddings, overrides, isolates: text that reorders what is
printed after it, CVE-2021-42574)."""


def displayable(text: str) -> str:
    """``text`` safe to print on a terminal: each control character (C0 but ``\\n`` and
    ``\\t``, DEL, C1) replaced by its visible escape ``\\xNN``, each bidirectional control
    (U+202E, U+2066, ...) by ``\\uNNNN``.

    ESC is one of them, so no escape sequence (colours, cursor moves, window titles, OSC 52
    clipboard writes) reaches the terminal; the rest of the sequence stays as plain text, so
    what was there is still shown.

    >>> displayable("ok\\x1b[2Jbye\\r\\n")
    'ok\\\\x1b[2Jbye\\\\x0d\\n'
    """
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def _missing(value: Any) -> bool:
    import pandas as pd

    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float) and math.isnan(value)


def _cell(value: Any, column: str) -> str:
    """One value as table text: the one missing marker, rounded floats, one line."""
    if _missing(value):
        return MISSING
    if column == "cost" or column.endswith("_cost"):
        return format_cost(float(value))
    if isinstance(value, float):
        if column in DECIMALS:
            return f"{value:.{DECIMALS[column]}f}"
        return f"{value:.3g}"
    text = str(value)
    return displayable(text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t"))


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _numeric(series: pd.Series) -> bool:
    import pandas as pd

    return pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


def table_text(df: pd.DataFrame, width: int) -> tuple[str, list[str]]:
    """``df`` as aligned text no wider than ``width``; also the columns left out.

    Cells are cut to :data:`CELL_MAX`; then the widest columns are narrowed, down to
    :data:`CELL_MIN` (never below their header); columns that still do not fit are left
    out from the right, and returned so the caller can say so.
    """
    columns = list(df.columns)
    cells = {c: [_cut(_cell(v, c), CELL_MAX) for v in df[c].tolist()] for c in columns}
    natural = {c: max([len(str(c)), *map(len, cells[c])]) for c in columns}
    floor = {c: max(len(str(c)), min(CELL_MIN, natural[c])) for c in columns}
    if columns:
        floor[columns[0]] = natural[columns[0]]

    def total(cols: list[str], w: dict[str, int]) -> int:
        return sum(w[c] for c in cols) + len(GAP) * (len(cols) - 1)

    left_out: list[str] = []
    while len(columns) > 1 and total(columns, floor) > width:
        left_out.insert(0, columns.pop())
    widths = dict(floor)
    spare = width - total(columns, floor)
    for c in columns:  # give the room left back, first columns first
        add = max(0, min(natural[c] - floor[c], spare))
        widths[c] += add
        spare -= add
    numeric = {c: _numeric(df[c]) for c in columns}

    def line(values: list[str]) -> str:
        parts = []
        for c, v in zip(columns, values, strict=True):
            v = _cut(v, widths[c])
            parts.append(v.rjust(widths[c]) if numeric[c] else v.ljust(widths[c]))
        return GAP.join(parts).rstrip()

    rows = [line([str(c) for c in columns])]
    rows += [line([cells[c][i] for c in columns]) for i in range(len(df))]
    return "\n".join(rows), left_out


def _markdown(df: pd.DataFrame) -> str:
    def esc(text: str) -> str:
        return text.replace("|", "\\|")

    head = "| " + " | ".join(esc(str(c)) for c in df.columns) + " |"
    rule = "|" + "|".join("---:" if _numeric(df[c]) else "---" for c in df.columns) + "|"
    body = [
        "| " + " | ".join(esc(_cell(v, c)) for c, v in zip(df.columns, row, strict=True)) + " |"
        for row in df.itertuples(index=False)
    ]
    return "\n".join([head, rule, *body])


def _json(df: pd.DataFrame) -> str:
    records = []
    for row in df.itertuples(index=False):
        records.append(
            {c: (None if _missing(v) else v) for c, v in zip(df.columns, row, strict=True)}
        )
    text = json.dumps(records, ensure_ascii=False, default=_json_value)
    # json escapes C0 itself; DEL and C1 (only ever inside strings) get JSON's own escape
    return re.sub("[\x7f-\x9f]", lambda m: f"\\u{ord(m.group()):04x}", text)


def _json_value(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


def render(df: pd.DataFrame, *, fmt: str = "table", width: int = 100) -> tuple[str, list[str]]:
    """``df`` in format ``fmt`` (:data:`FORMATS`); for ``table`` fitted to ``width``.

    Returns the text and the columns left out to fit the width (only ``table`` leaves any).
    """
    if fmt == "table":
        return table_text(df, width)
    if fmt == "markdown":
        return _markdown(df), []
    if fmt == "csv":
        buf = io.StringIO()
        df.to_csv(buf, index=False)
        return displayable(buf.getvalue().rstrip("\n")), []
    if fmt == "json":
        return _json(df), []
    raise ValueError(f"unknown format {fmt!r}; one of: {', '.join(FORMATS)}")


# -- config example ---------------------------------------------------------------------


def _comment(doc: str, indent: str) -> list[str]:
    text = " ".join(doc.split()).replace("``", "`")
    return [f"{indent}// {ln}" for ln in textwrap.wrap(text, 88 - len(indent))]


def config_example() -> str:
    """Every LabConfig field at its reference default, each under a ``//`` comment.

    :func:`load_config` (``lab replay --config FILE``) reads it back; change a value and
    delete the lines you leave at their defaults.
    """
    cfg = LabConfig()
    data = json.loads(cfg.model_dump_json())
    docs = field_docs(LabConfig)
    spill_docs = field_docs(SpillGuardConfig)
    lines = [
        "// Stream Lab config: every field at the reference pipeline's default.",
        "// Use it with: lab replay PATH --config FILE   (or --compare FILE for an A/B).",
        "// Lines starting with // are comments; keep only the fields you change.",
        "{",
    ]
    names = list(data)
    for i, name in enumerate(names):
        comma = "," if i < len(names) - 1 else ""
        lines += _comment(docs.get(name, name), "  ")
        if name == "spill":
            lines.append('  "spill": {')
            spill = list(data["spill"])
            for j, key in enumerate(spill):
                lines += _comment(spill_docs.get(key, key), "    ")
                inner = "," if j < len(spill) - 1 else ""
                value = json.dumps(data["spill"][key], ensure_ascii=False)
                lines.append(f'    "{key}": {value}{inner}')
            lines.append("  }" + comma)
        else:
            lines.append(f'  "{name}": {json.dumps(data[name], ensure_ascii=False)}{comma}')
    lines.append("}")
    return "\n".join(lines)


def strip_comments(text: str) -> str:
    """``text`` without its ``//`` comment lines (whole lines only: a ``//`` inside a JSON
    string value is kept)."""
    return "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("//"))


def _named_complete() -> Any:
    return LabConfig.complete()


def _named_reference() -> Any:
    return LabConfig()


NAMED_CONFIGS = {"complete": _named_complete, "reference": _named_reference}
"""Config names ``--config`` / ``--compare`` accept besides a file."""


def load_config(path: str | Path | None) -> Any:
    """A LabConfig from a JSON file that may hold ``//`` comment lines (None: defaults).

    Two names stand for built-in configs when no file of that name exists: ``reference``
    (the defaults: the reference pipeline) and ``complete`` (``LabConfig.complete()``: every
    switch beyond the reference on), so ``lab replay CAPTURE --compare complete`` shows what
    the reference pipeline loses on a capture.
    """
    if path is None:
        return LabConfig()
    p = Path(path)
    if str(path) in NAMED_CONFIGS and not p.exists():
        return NAMED_CONFIGS[str(path)]()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: config file does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read the config file ({exc})") from None
    if not any(ln.lstrip().startswith("//") for ln in text.splitlines()):
        return LabConfig.load(p)  # a plain JSON file: the library's own reader
    try:
        data = json.loads(strip_comments(text))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{p}: not a JSON config file ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: a config file holds a JSON object")
    try:
        return LabConfig.coerce(data)
    except ConfigError as exc:
        raise ConfigError(f"{p}: {exc}") from None
