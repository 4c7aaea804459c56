"""Importing ``lab.plots`` leaves the user's matplotlib backend alone (only the CLI and the
tests choose one), and its figures render whatever backend is set. Each case runs in a
fresh interpreter: the backend is process-wide state this test session has already set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    clean["PYTHONPATH"] = os.pathsep.join([str(ROOT), clean.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_importing_lab_plots_keeps_the_backend_the_user_chose():
    code = "import matplotlib; matplotlib.use('svg'); import lab.plots; print(matplotlib.get_backend())"
    assert _run(code) == "svg"


def test_importing_lab_plots_keeps_a_qt_users_backend():
    # the case that used to be switched to Agg; Qt itself need not be installed: the name is
    # only set, and nothing here draws on screen
    code = (
        "import matplotlib; matplotlib.rcParams['backend'] = 'QtAgg'; import lab.plots; "
        "print(matplotlib.rcParams._get_backend_or_none())"
    )
    assert _run(code) == "QtAgg"


def test_importing_lab_plots_does_not_resolve_an_unset_backend():
    # with no backend chosen, matplotlib picks one lazily on first pyplot use; importing
    # lab.plots must not pick one early (it used to force Agg)
    code = "import matplotlib; import lab.plots; print(matplotlib.rcParams._get_backend_or_none())"
    assert _run(code) == "None"


def test_importing_lab_plots_keeps_a_backend_set_by_environment():
    code = "import matplotlib; import lab.plots; print(matplotlib.get_backend())"
    assert _run(code, MPLBACKEND="pdf") == "pdf"


def test_figures_render_to_png_under_a_non_agg_backend(tmp_path):
    code = (
        "import matplotlib, sys; matplotlib.use('svg')\n"
        "from lab import plots, tables\n"
        "from lab.replay import replay\n"
        "results = replay('captures')\n"
        "written = plots.write_all(results, sys.argv[1])\n"
        "print(sorted(written), matplotlib.get_backend())\n"
    )
    code = code.replace("sys.argv[1]", repr(str(tmp_path)))
    out = _run(f"import os; os.chdir({str(ROOT)!r})\n" + code)
    assert out == (
        "['classifiers', 'gaps', 'leaks_by_backend', 'timeline', 'ttft_by_backend', "
        "'ttft_ecdf'] svg"
    )
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert len(pngs) == 6
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in tmp_path.glob("*.png"))
