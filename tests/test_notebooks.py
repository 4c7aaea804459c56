"""The working notebooks execute headless, top to bottom, without an error output.

Notebook 02 is executed by ``tests/test_tuning.py``; this module runs every other notebook in
``notebooks/`` (01 and 03 today, and any notebook added later) with nbclient, the way CI
and ``jupyter nbconvert --execute`` would: cwd ``notebooks/``, ``MPLBACKEND=Agg``, on the
bundled sample capture (``LAB_CAPTURES`` unset) -- and 01 and 03 again on small captures
recorded here from the fake server that do not look like the sample (no OpenRouter stream, no
leak, spills on another backend than Novita, no spill at all).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from lab.demo import demo_requests

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
EXECUTED_ELSEWHERE = {"02-tune-spill-guard.ipynb"}  # tests/test_tuning.py
ALL = sorted(NOTEBOOKS.glob("*.ipynb"))
HERE = [p for p in ALL if p.name not in EXECUTED_ELSEWHERE]
CELL_TIMEOUT_S = 180  # a hung cell fails; how long a notebook takes is not a pass/fail matter
PARAMETERS_LINE = 'CAPTURES = os.environ.get("LAB_CAPTURES", "../captures")'


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        if f.is_file():
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def test_the_investigation_and_fixture_notebooks_are_here():
    names = {p.name for p in HERE}
    assert {"01-openrouter-backends.ipynb", "03-regression-fixtures.ipynb"} <= names


@pytest.mark.parametrize("path", HERE, ids=[p.name for p in HERE])
def test_notebook_is_committed_without_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = [cell for cell in nb["cells"] if cell["cell_type"] == "code"]
    assert code
    for cell in code:
        assert cell["outputs"] == [] and cell["execution_count"] is None


def _execute(path: Path, monkeypatch, captures: Path | None = None):
    """Run one notebook headless; ``captures`` goes to the kernel as LAB_CAPTURES (None: unset).

    Returns (notebook with outputs, every stream text it printed). Checks that the
    run left the repository's fixtures alone and wrote no ``notebooks/tests``.
    """
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    if captures is None:
        monkeypatch.delenv("LAB_CAPTURES", raising=False)
    else:  # the kernel inherits this process's environment when nbclient starts it
        monkeypatch.setenv("LAB_CAPTURES", str(captures))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    fixtures_before = _tree_digest(NOTEBOOKS.parent / "tests" / "fixtures")
    try:
        client.execute()
    finally:
        # running a notebook never modifies the repository's fixtures (it exports to a temp dir)
        assert _tree_digest(NOTEBOOKS.parent / "tests" / "fixtures") == fixtures_before
        assert not (path.parent / "tests").exists()
    text = "".join(
        out.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.get("output_type") == "stream"
    )
    return nb, text


def _check_outputs(path: Path, nb) -> None:
    errors = [
        f"{out.get('ename')}: {out.get('evalue')}"
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.get("output_type") == "error"
    ]
    assert errors == []
    # every cell that returns a lab figure shows it as an image, not "<Figure size ...>"
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.outputs:
            text = out.get("data", {}).get("text/plain", "")
            if text.startswith("<lab.plots.LabFigure") or text.startswith("<Figure size"):
                assert "image/png" in out["data"], (path.name, cell.source[:60])
    if path.name.startswith("01-"):
        images = sum(
            "image/png" in out.get("data", {})
            for c in nb.cells
            if c.cell_type == "code"
            for out in c.outputs
        )
        assert images >= 4


@pytest.mark.parametrize("path", HERE, ids=[p.name for p in HERE])
def test_notebook_first_code_cell_is_the_parameters_cell(path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert "parameters" in first.metadata.get("tags", [])
    assert PARAMETERS_LINE in first.source
    later = "".join(c.source for c in nb.cells if c.cell_type == "code" and c is not first)
    assert "CAPTURES =" not in later


@pytest.mark.parametrize("path", HERE, ids=[p.name for p in HERE])
def test_notebook_executes_headless_without_errors(path, monkeypatch):
    nb, text = _execute(path, monkeypatch)
    _check_outputs(path, nb)
    if path.name.startswith("01-"):
        assert "worst backend: " in text
        assert "worst backend: openrouter (no backend" not in text
        # the verdicts in words, from lab.tables.backend_verdicts
        assert "Leaks: no backend is worse than the rest with 95 % confidence." in text
        assert "Leaks: too few streams to tell: Parasail (1 stream)" in text
    if path.name.startswith("03-"):
        assert "spill stream(s) on Novita" in text
        assert "repository fixtures match their golden" in text


# -- captures that do not look like the bundled sample -------------------------------------


def _requests(family: str, models: set[str], seeds: set[int]) -> list[dict]:
    items = demo_requests(max(seeds) + 1, families=(family,))
    return [i for i in items if i["body"]["model"] in models and i["body"]["seed"] in seeds]


@pytest.fixture(scope="module")
def other_captures(tmp_path_factory, fake_server) -> dict[str, Path]:
    """Small captures from the fake server (OpenRouter backend = pool[seed % len(pool)])."""
    from lab.recorder import Recorder

    plans = {
        # OpenRouter streams, none leaks; context-length fails before any backend is named
        "no-leak": _requests("openrouter", {"fake/clean", "fake/context-length"}, {0, 1}),
        # no OpenRouter stream at all
        "direct-only": _requests("anthropic", {"fake/clean", "fake/thinking"}, {0}),
        # spills on Parasail (seed 2) only, DeepInfra (seed 1) serves fake/spill cleanly
        "spill-parasail": _requests("openrouter", {"fake/spill"}, {1, 2}),
        # a think leak (Chutes, seed 0), no spill anywhere
        "no-spill": _requests("openrouter", {"fake/think-leak", "fake/clean"}, {0}),
    }
    out = {}
    for name, items in plans.items():
        assert items, name
        with Recorder(tmp_path_factory.mktemp(name), label=name) as rec:
            for item in items:
                rec.record(
                    item["provider"],
                    item["body"],
                    base_url=fake_server.base_url + item["base_path"],
                )
        out[name] = rec.path
    return out


NB01 = NOTEBOOKS / "01-openrouter-backends.ipynb"
NB03 = NOTEBOOKS / "03-regression-fixtures.ipynb"


@pytest.mark.parametrize(
    ("capture", "expected"),
    [
        (
            "no-leak",
            [
                "4 OpenRouter stream(s) of 4",
                "nothing leaked: no guard moved reasoning out of any of the 4 stream(s); "
                "drilling into the first stream instead",
            ],
        ),
        (
            "direct-only",
            [
                "no OpenRouter stream in ",
                "tabulating all 2 stream(s) per serving provider instead (providers: anthropic)",
                "nothing leaked",
                "(anthropic (direct))",
            ],
        ),
        (
            "spill-parasail",
            [
                "worst backend: Parasail (leak rate 100%, 1/1 streams leaked)",
                "no backend with a leak served 2+ streams; took the leakiest one",
            ],
        ),
    ],
)
def test_backends_notebook_on_a_capture_unlike_the_sample(
    other_captures, monkeypatch, capture, expected
):
    nb, text = _execute(NB01, monkeypatch, other_captures[capture])
    _check_outputs(NB01, nb)
    for sentence in expected:
        assert sentence in text


def test_fixtures_notebook_falls_back_to_the_backend_with_the_most_spills(
    other_captures, monkeypatch
):
    nb, text = _execute(NB03, monkeypatch, other_captures["spill-parasail"])
    _check_outputs(NB03, nb)
    assert "no spill stream on Novita; spill streams per backend: Parasail 1" in text
    assert "1 spill stream(s) on Parasail" in text
    assert "spill-parasail-" in text  # fixture names from lab.fixtures.default_name


def test_fixtures_notebook_without_a_spill_stream_stops_with_a_clear_error(
    other_captures, monkeypatch
):
    nbclient = pytest.importorskip("nbclient")
    with pytest.raises(nbclient.exceptions.CellExecutionError) as exc:
        _execute(NB03, monkeypatch, other_captures["no-spill"])
    assert exc.value.ename == "ValueError"
    assert exc.value.evalue.startswith(f"no spill stream in {other_captures['no-spill']}: ")
    assert "guards that did fire: think_stripper" in exc.value.evalue


PARTIAL = "s18ec9d7c919ad13206eb17"  # the sample's stream the think stripper cleaned in part


def _pages(nb) -> str:
    """Every HTML the notebook shows: its cells' HTML outputs and its widgets' HTML values
    (the saved widget state, as a viewer restores it)."""
    out = [
        o["data"]["text/html"]
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "text/html" in o.get("data", {})
    ]
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    for model in state.get("state", {}).values():
        value = model.get("state", {}).get("value")
        if isinstance(value, str):
            out.append(value)
    return "".join(out)


def test_backends_notebook_drills_into_the_stream_named_by_lab_stream(monkeypatch):
    monkeypatch.setenv("LAB_STREAM", PARTIAL)
    nb, text = _execute(NB01, monkeypatch)
    _check_outputs(NB01, nb)
    assert f"STREAM_ID is set: drilling into {PARTIAL} instead" in text
    page = _pages(nb)
    assert "<b>1 stream(s) cleaned only in part</b>" in page  # the overview
    # the explorer, on the stream LAB_STREAM names: drawn once, with its partial clean
    assert page.count(f"<b>{PARTIAL}</b>") == 2  # the widget's view + the static copy
    assert "the closing reasoning tag arrived after 42 chars of reasoning" in page
    assert "loaded 1 recording(s) from ../captures: 20261129T201827-5ed78725" in text
    # latency, what changed (the capture's halves without LAB_PREVIOUS), the trend's span
    assert "LAB_PREVIOUS is not set: comparing the first 24 stream(s) of ../captures" in text
    assert "comparisons by the Holm method." in text
    assert "a daily trend needs more than a day" in text
    # latency per backend, a row each: DeepInfra's 8 timed streams, TTFB and TTFT medians with
    # their bootstrap intervals; then the TTFT ECDF and the gap histogram
    cell = next(c for c in nb.cells if "latency = tables.latency(subject)" in c.source)
    (html,) = [o["data"]["text/html"] for o in cell.outputs if "text/html" in o.get("data", {})]
    assert re.search(
        r"<th>DeepInfra</th>\s*<td>8</td>\s*<td>13.9 \(8.6–15.5\)</td>\s*"
        r"<td>30.6 \(24.3–36.9\)</td>",
        html,
    )
    assert "<th>Targon</th>" in html and "rows ×" not in html  # every backend, none cut
    for call in ("plots.ttft_ecdf(subject)", "plots.gap_histogram(content_gaps"):
        cell = next(c for c in nb.cells if call in c.source)
        assert [o for o in cell.outputs if "image/png" in o.get("data", {})], call


def test_backends_notebook_compares_with_the_run_named_by_lab_previous(monkeypatch):
    monkeypatch.setenv("LAB_PREVIOUS", str(NOTEBOOKS.parent / "captures"))
    nb, text = _execute(NB01, monkeypatch)
    _check_outputs(NB01, nb)
    assert "LAB_PREVIOUS is not set" not in text
    assert "No change with confidence in " in text  # the same capture on both sides


def _days_long_capture(root: Path, days: range = range(4)) -> Path:
    """A recording over four days (or those of ``days``), 12 streams a day, whose answers
    start leaking reasoning on the third day (written through the capture writer, with
    per-read timing)."""
    from datetime import timedelta

    from tests.latency_captures import DONE, MS, STARTED, content, exchange_row, sse, write_capture

    exchanges = []
    for day in days:
        for i in range(12):
            text = "<think>plan the answer</think>Hello there" if day >= 2 else "Hello there"
            reads = [content(text), sse({}), DONE]
            row = exchange_row(
                f"s{day}{i:02d}",
                reads,
                k=len(exchanges),
                started_at=STARTED + timedelta(days=day, minutes=i),
            )
            exchanges.append((row, reads, [100 * MS, 120 * MS, 130 * MS]))
    return write_capture(root, exchanges)


def test_backends_notebook_says_what_changed_since_the_run_named_by_lab_previous(
    monkeypatch, tmp_path
):
    """Two runs of one backend: the first two days answer cleanly, the last two leak."""
    before = _days_long_capture(tmp_path / "before", range(2))
    monkeypatch.setenv("LAB_PREVIOUS", str(before))
    nb, text = _execute(
        NB01, monkeypatch, captures=_days_long_capture(tmp_path / "after", range(2, 4))
    )
    _check_outputs(NB01, nb)
    cell = next(c for c in nb.cells if "lab.compare(before, after" in c.source)
    printed = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
    assert printed == (
        "openai (direct): leak rate up from 0.0 % (0.0–13.8 %) to 100.0 % (86.2–100.0 %), "
        "p < 0.001\n"
        "p-values adjusted for 4 comparisons by the Holm method.\n"
    )
    (table,) = [o["data"]["text/html"] for o in cell.outputs if "text/html" in o.get("data", {})]
    assert "leak_rate" in table and "True" in table


def test_backends_notebook_shows_the_daily_trend_of_a_capture_over_days(monkeypatch, tmp_path):
    nb, text = _execute(NB01, monkeypatch, captures=_days_long_capture(tmp_path))
    _check_outputs(NB01, nb)
    assert "1 series changed level over 3 days 00:11:00" in text
    cell = next(c for c in nb.cells if "tables.trends(subject" in c.source)
    tables_html = [o["data"]["text/html"] for o in cell.outputs if "text/html" in o.get("data", {})]
    assert len(tables_html) == 1 and "leak_rate" in tables_html[0]
    assert "2026-12-03 00:00:00+00:00" in tables_html[0]  # the day the leaks began
    pngs = [o for o in cell.outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 1  # the leak rate, the one series that changed


def test_fixtures_notebook_takes_any_stream_and_any_predicate(monkeypatch):
    monkeypatch.setenv("LAB_STREAM", PARTIAL)
    monkeypatch.setenv("LAB_PREDICATE", "guard=think_stripper")
    nb, text = _execute(NB03, monkeypatch)
    _check_outputs(NB03, nb)
    assert f"STREAM_ID is set: {PARTIAL} (SiliconFlow), where guard=think_stripper holds" in text
    assert "(this fixture does not depend on the spill guard" in text


MARKUP = '<img src=x onerror="window.__labPwned=1"><script>window.__labPwned=1</script>'


@pytest.fixture
def hostile_capture(tmp_path, canned_server):
    """A recording whose backend name, answer, leaked reasoning and error are markup."""
    import json as _json

    from lab.recorder import Recorder

    chunks = [
        {"provider": f"Evil{MARKUP}", "choices": [{"index": 0, "delta": {"content": f"<think>plan {MARKUP}</think>Answer {MARKUP}"}, "finish_reason": None}]},
        {"provider": f"Evil{MARKUP}", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]  # fmt: skip
    sse = "".join(f"data: {_json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    rejected = _json.dumps({"error": {"message": f"rejected {MARKUP}", "code": 400}})

    def answer(path: str) -> tuple[int, str, bytes]:
        if "bad" in path:
            return 400, "application/json", rejected.encode()
        return 200, "text/event-stream", sse.encode()

    base = canned_server(answer)
    with Recorder(tmp_path / "captures", label="hostile") as rec:
        body = {"model": "evil/model", "messages": [{"role": "user", "content": "hi"}], "stream": True}  # fmt: skip
        good = rec.record("openrouter", body, base_url=base + "/ok", api_key="k")
        rec.record("openrouter", body, base_url=base + "/bad", api_key="k")
    return rec.path, good.stream_id


def test_backends_notebook_shows_markup_from_the_stream_as_text(hostile_capture, monkeypatch):
    path, stream_id = hostile_capture
    monkeypatch.setenv("LAB_STREAM", stream_id)
    nb, _ = _execute(NB01, monkeypatch, path)
    _check_outputs(NB01, nb)
    html_out = [
        out["data"]["text/html"]
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if "text/html" in out.get("data", {})
    ]
    page = "".join(html_out)
    assert html_out and "<img src=x onerror" not in page and "<script>window" not in page
    assert "&lt;img src=x onerror" in page  # the backend name, the reads: shown as text
    assert page.count("Evil&lt;img src=x onerror") >= 2  # the backend, in the overview tables
