"""docs/reference.md is the reference the code cites: its sections are numbered in order, and
every pointer into it (``docs/reference.md, "<heading>"``) names a heading it has."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference.md"
POINTER = re.compile(r'docs/reference\.md, "([^"\n]+)"')
PATTERN = "<heading>"  # how the reference and this test write the pointer form itself


def _headings() -> list[str]:
    return re.findall(r"^#{2,3} (.+)$", REFERENCE.read_text(encoding="utf-8"), flags=re.M)


def _text_of(path: Path) -> str:
    """A file's text; for a notebook, its cells' sources (the JSON escapes the quotes)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".ipynb":
        cells = json.loads(text)["cells"]
        return "\n".join("".join(cell["source"]) for cell in cells)
    return text


def _cited_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
    for folder, patterns in [
        ("lab", ["*.py"]),
        ("tests", ["*.py"]),
        ("docs", ["*.md"]),
        ("notebooks", ["*.ipynb", "*.py"]),
        ("bench", ["*.py"]),
    ]:
        for pattern in patterns:
            files += sorted((ROOT / folder).rglob(pattern))
    return [f for f in files if f.is_file()]


def test_sections_are_numbered_in_order_under_their_part():
    part = 0
    sub = 0
    for heading in _headings():
        top = re.fullmatch(r"(\d+)\. \S.*", heading)
        if top:
            assert int(top.group(1)) == part + 1, heading
            part, sub = part + 1, 0
            continue
        numbered = re.fullmatch(r"(\d+)\.(\d+) \S.*", heading)
        assert numbered, heading
        assert (int(numbered.group(1)), int(numbered.group(2))) == (part, sub + 1), heading
        sub += 1


def test_headings_are_unique():
    headings = _headings()
    assert len(headings) == len(set(headings))


def test_every_pointer_names_an_existing_heading():
    headings = set(_headings())
    pointers: list[tuple[str, str]] = []
    for path in _cited_files():
        for title in POINTER.findall(_text_of(path)):
            if title != PATTERN:
                pointers.append((str(path.relative_to(ROOT)), title))
    for title in re.findall(r'\(see "([^"\n]+)"\)', REFERENCE.read_text(encoding="utf-8")):
        pointers.append(("docs/reference.md", title))
    assert pointers  # the code does cite the reference
    assert [(f, t) for f, t in pointers if t not in headings] == []


def test_a_pointer_is_written_on_one_line():
    """A pointer split across lines would escape the check above."""
    split = re.compile(r'docs/reference\.md,(?:\s*#)?\s*\n|docs/reference\.md, "[^"\n]*\n')
    offenders = [
        str(path.relative_to(ROOT)) for path in _cited_files() if split.search(_text_of(path))
    ]
    assert offenders == []


def test_the_old_citation_table_maps_every_row_to_existing_headings():
    text = REFERENCE.read_text(encoding="utf-8")
    table = text[text.index("## 11. Where the old citations point") :]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) > 40
    headings = set(_headings())
    for row in rows[1:]:
        cited = re.findall(r'"([^"]+)"', row)
        assert cited, row
        assert [c for c in cited if c not in headings] == [], row


def test_no_section_sign_remains_in_the_code_docs_or_notebooks():
    """Citations say the rule or point into docs/reference.md; a section sign pointed at
    documents the repository does not hold."""
    sign = "\u00a7"
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in _cited_files()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if sign in line
    ]
    assert offenders == []
