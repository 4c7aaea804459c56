"""``lab compare A B`` and ``lab sweep --compare PREVIOUS_OUT``: what changed, in words."""

from __future__ import annotations

from pathlib import Path

from lab.cli import main
from lab.fakes import FakeServer

ROOT = Path(__file__).resolve().parents[1]


def _sweep(srv, prompts: Path, out: Path, *extra: str) -> int:
    return main(
        ["sweep", "--provider", "openrouter", "--model", "fake/think-leak"]
        + ["--prompts", str(prompts), "--base-url", srv.base_url + "/api/v1"]
        + ["--out", str(out), "--n", "4", "--quiet", *extra]
    )


def test_lab_compare_prints_the_changes_then_the_table(tmp_path, capsys):
    captures = str(ROOT / "captures")
    assert main(["compare", captures, captures, "--correction", "bh"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("No change with confidence in ")
    assert lines[1].endswith("comparisons by the Benjamini-Hochberg method.")
    assert "== compare (" in out and "p_adjusted" in out


def test_lab_compare_refuses_a_missing_run_in_one_line(tmp_path, capsys):
    assert main(["compare", str(tmp_path / "nope"), str(ROOT / "captures")]) == 2
    err = capsys.readouterr().err
    assert err == f"lab: error: {tmp_path / 'nope'}: no such file or directory\n"


def test_lab_sweep_ends_with_what_changed_since_the_previous_sweep(tmp_path, capsys):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('"Hi! Any café tips?"\n')
    with FakeServer(delay_scale=0) as srv:
        assert _sweep(srv, prompts, tmp_path / "before") == 0
        capsys.readouterr()
        assert _sweep(srv, prompts, tmp_path / "after", "--compare", str(tmp_path / "before")) == 0
    out = capsys.readouterr().out
    assert f"lab sweep: what changed since {tmp_path / 'before'}" in out
    tail = out[out.index("lab sweep: what changed since") :]
    assert "comparisons by the Holm method." in tail
    assert out.endswith(" comparisons by the Holm method.\n")  # the sweep ends with it
    # lab compare takes the two sweeps' --out directories as they are
    assert main(["compare", str(tmp_path / "before"), str(tmp_path / "after")]) == 0
    compared = capsys.readouterr().out
    said = tail.splitlines()[1:]  # the sentences, then the correction's note
    assert compared.splitlines()[: len(said)] == said  # the same comparisons, in words
    assert "== compare (" in compared and "Chutes" in compared


def test_lab_sweep_refuses_a_missing_previous_run_before_sending(tmp_path, capsys):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('"hi"\n')
    rc = main(
        ["sweep", "--provider", "openrouter", "--model", "fake/think-leak", "--prompts"]
        + [str(prompts), "--base-url", "http://127.0.0.1:9/api/v1", "--out", str(tmp_path / "o")]
        + ["--compare", str(tmp_path / "missing")]
    )
    err = capsys.readouterr().err
    assert (
        rc == 2
        and err == f"lab: error: --compare {tmp_path / 'missing'}: no such file or directory\n"
    )
    assert not (tmp_path / "o").exists()
