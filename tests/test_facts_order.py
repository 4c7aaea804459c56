"""A replay's facts are the same from run to run: nothing in them follows a set's order
(which ``PYTHONHASHSEED`` changes from process to process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

_SHAPES_SCRIPT = """
import json, sys
from lab.replay import replay_sse
extra = {k: 1 for k in ("zeta", "alpha", "mu", "beta", "omega", "kappa", "delta", "eta")}
chunk = {"id": "c1", "model": "m", **extra,
         "choices": [{"index": 0, "delta": {"content": "hi", **extra}, "finish_reason": None}]}
body = ("data: " + json.dumps(chunk) + "\\n\\ndata: [DONE]\\n\\n").encode()
for provider in ("openai", "openrouter"):
    print(json.dumps(list(replay_sse(provider, body).facts["unhandled_shapes"])))
"""


def test_unhandled_shapes_are_named_in_the_wire_order_whatever_the_hash_seed():
    """The facts of a replay (and so its tables and files) are the same from run to run:
    unknown keys are counted in the object's order, not a set's."""
    outs = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-c", _SHAPES_SCRIPT], env=env, capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr
        outs.append(run.stdout)
    assert outs[0] == outs[1] == outs[2]
    names = ("zeta", "alpha", "mu", "beta", "omega", "kappa", "delta", "eta")
    for line in outs[0].splitlines():
        got = json.loads(line)
        assert [p for p in got if not p.startswith("choices")] == list(names)
