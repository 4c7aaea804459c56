"""Identical results across a refactor: replay everything the repository holds, dump it, compare.

Replays every bundled capture (``captures/``), every regression fixture (``tests/fixtures``)
and every real provider body (``tests/realworld/*.sse``) under the default config and under
``LabConfig.complete()``, and writes what came out:

- ``lab.tables.streams``, ``leaks``, ``attempts``, ``by_backend`` (and ``gaps`` where the
  version has it) of each source and config;
- every result in full (``to_dict()``, its chunks, read offsets and divergence);
- the Parquet tables ``lab replay captures --out DIR`` writes (the CLI, both configs), as
  DataFrames and as the Arrow tables in the files (types, nulls, schema metadata), and those
  ``replay(path, out=DIR)`` writes for every bundled and fixture capture;
- every real HTTP error body of ``tests/realworld/http_errors.json`` through
  ``lab.errors.normalize_http_error`` (default and complete body error codes).

Run it on two checkouts, then compare the dumps::

    PYTHONPATH=/tmp/wt-base python bench/replay_equality.py dump /tmp/eq-base
    PYTHONPATH=. python bench/replay_equality.py dump /tmp/eq-new
    python bench/replay_equality.py compare /tmp/eq-base /tmp/eq-new

``dump`` uses whichever ``lab`` the interpreter imports (print it: the first line says which);
``compare`` exits 1 and names every table that differs.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _full(result: Any) -> dict:
    d = result.to_dict()
    d["origins"] = [repr(o) for o in result.origins]
    d["read_t_ns"] = result.read_t_ns
    d["chunks"] = [c.model_dump() for c in result.chunks]
    d["divergence"] = result.divergence
    return d


_CLOCKED = ("ttft", "ttfb", "duration", "tokens_per_s", "t_ms", "gap", "stall")


def _tables(results: list, clocked: bool = False) -> dict[str, Any]:
    """The tables of ``results``. **clocked**: the results of one body (``replay_sse``) carry
    this run's wall-clock read times, not recorded ones: those columns are left out."""
    from lab import tables

    out = {
        "streams": tables.streams(results),
        "leaks": tables.leaks(results),
        "attempts": tables.attempts(results),
        "by_backend": tables.by_backend(results),
        "results": [_full(r) for r in results],
    }
    if hasattr(tables, "gaps"):  # the read-gap table (not in every version)
        out["gaps"] = tables.gaps(results)
    if clocked:
        for name in ("streams", "leaks", "attempts", "by_backend", "gaps"):
            if name not in out:
                continue
            df = out[name]
            out[name] = df.drop(columns=[c for c in df.columns if any(k in c for k in _CLOCKED)])
        for r in out["results"]:
            r.pop("read_t_ns")
            for k in [k for k in r if any(c in k for c in _CLOCKED)]:
                r.pop(k)
    return out


def _sources() -> dict[str, Any]:
    """name -> a function of the config giving the results of that source."""
    from lab.replay import replay, replay_sse

    out: dict[str, Any] = {"captures": lambda cfg: list(replay(ROOT / "captures", config=cfg))}
    for fx in sorted((ROOT / "tests" / "fixtures").iterdir()):
        if (fx / "capture").is_dir():
            out[f"fixture:{fx.name}"] = lambda cfg, fx=fx: list(replay(fx / "capture", config=cfg))
    here = ROOT / "tests" / "realworld"
    sources = json.loads((here / "sources.json").read_text(encoding="utf-8"))
    for src in sorted(sources, key=lambda s: s["name"]):

        def body(cfg: Any, src: dict = src) -> list:
            return [
                replay_sse(
                    src["provider"],
                    (here / src["file"]).read_bytes(),
                    config=cfg,
                    stream_id=src["name"],
                    path=src.get("request_path"),
                )
            ]

        out[f"realworld:{src['name']}"] = body
    return out


def _capture_paths() -> dict[str, Path]:
    """Every capture the repository holds: the bundled ones and each fixture's."""
    out = {"captures": ROOT / "captures"}
    for fx in sorted((ROOT / "tests" / "fixtures").iterdir()):
        if (fx / "capture").is_dir():
            out[f"fixture:{fx.name}"] = fx / "capture"
    return out


def _out_parquet(path: Path, cfg: Any) -> dict[str, Any]:
    """The Arrow tables ``replay(path, out=DIR)`` writes (in this process)."""
    import warnings

    import pyarrow.parquet as pq

    from lab.replay import replay

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = Path(tmp) / "out"
        replay(path, out=out, config=cfg)
        return {p.name: pq.read_table(p) for p in sorted(out.glob("*.parquet"))}


def _http_errors() -> dict[str, Any]:
    from lab.config import LabConfig
    from lab.errors import normalize_http_error

    here = ROOT / "tests" / "realworld"
    errors = json.loads((here / "http_errors.json").read_text(encoding="utf-8"))
    out = {}
    for e in sorted(errors, key=lambda e: e["name"]):
        body = (here / e["file"]).read_text(encoding="utf-8")
        for cname, cfg in (("default", LabConfig()), ("complete", LabConfig.complete())):
            err = normalize_http_error(
                e["provider"], e["status"], body, body_error_codes=cfg.body_error_codes
            )
            out[f"{e['name']}/{cname}"] = None if err is None else err.model_dump()
    return out


def _cli_parquet(config: str) -> dict[str, Any]:
    import pandas as pd
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        cmd = [sys.executable, "-m", "lab.cli", "replay", str(ROOT / "captures"), "--out", str(out)]
        if config != "default":
            cmd += ["--config", config]
        subprocess.run(cmd, check=True, capture_output=True, env=os.environ.copy())
        files = sorted(out.glob("*.parquet"))
        tables = {p.name: pd.read_parquet(p) for p in files}
        # the files themselves too: column types, nulls and schema metadata, not only the
        # DataFrame pandas makes of them
        tables |= {f"{p.name} (arrow)": pq.read_table(p) for p in files}
        return tables


def dump(dest: Path) -> None:
    import lab
    from lab.config import LabConfig

    print(f"lab from {lab.__file__}")
    dest.mkdir(parents=True, exist_ok=True)
    configs = {"default": LabConfig(), "complete": LabConfig.complete()}
    everything: dict[str, Any] = {}
    for name, results_of in _sources().items():
        for cname, cfg in configs.items():
            clocked = name.startswith("realworld:")
            everything[f"{name}/{cname}"] = _tables(results_of(cfg), clocked)
    for name, path in _capture_paths().items():
        for cname, cfg in configs.items():
            everything[f"out-parquet:{name}/{cname}"] = _out_parquet(path, cfg)
    everything["http_errors"] = _http_errors()
    for cname in configs:
        everything[f"cli-parquet/{cname}"] = _cli_parquet(cname)
    with open(dest / "dump.pickle", "wb") as f:
        pickle.dump(everything, f, protocol=pickle.HIGHEST_PROTOCOL)
    print(f"{len(everything)} entries -> {dest / 'dump.pickle'}")


def _same(a: Any, b: Any) -> bool:
    import pandas as pd
    import pyarrow as pa

    if isinstance(a, pa.Table) or isinstance(b, pa.Table):
        return (
            isinstance(a, pa.Table) and isinstance(b, pa.Table) and a.equals(b, check_metadata=True)
        )

    if isinstance(a, pd.DataFrame) or isinstance(b, pd.DataFrame):
        if not (isinstance(a, pd.DataFrame) and isinstance(b, pd.DataFrame)):
            return False
        try:
            pd.testing.assert_frame_equal(a, b, check_exact=True)
        except AssertionError:
            return False
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def compare(a_dir: Path, b_dir: Path) -> int:
    with open(a_dir / "dump.pickle", "rb") as f:
        a = pickle.load(f)
    with open(b_dir / "dump.pickle", "rb") as f:
        b = pickle.load(f)
    bad = sorted(set(a) ^ set(b))
    tables = 0
    for key in sorted(set(a) & set(b)):
        for table in a[key]:
            tables += 1
            if table not in b[key] or not _same(a[key][table], b[key][table]):
                bad.append(f"{key} {table}")
    for line in bad:
        print(f"differs: {line}")
    print(f"{len(a)} sources x configs, {tables} tables compared: {len(bad)} differ")
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "dump":
        dump(Path(argv[1]))
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        return compare(Path(argv[1]), Path(argv[2]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
