"""Power of the same-model test (lab.sameness) on the fake models, by simulation.

    python bench/sameness_power.py [--prompts 10] [--k 2 5 10 20] [--seeds 100]

For each K (outputs per prompt and backend), ``--seeds`` simulated sweeps: a reference
backend, a clean backend serving the same model, one serving a substituted model and one
serving the reference with a small shift (``lab.fakes.model_equality``). Prints the share of
sweeps in which each backend came out ``differs with confidence`` against the reference:
the power for the substituted and shifted ones, the false-positive rate for the clean one.
Not a pass/fail benchmark: the figures go in docs/sameness.md.
"""

from __future__ import annotations

import argparse
import random
import time

import pandas as pd

from lab.fakes.model_equality import sample_answer
from lab.sameness import VERDICT_DIFFERS, same_model

MODELS = {
    "Ref": "reference",
    "Clean": "reference",
    "Substituted": "substituted",
    "Shifted": "shifted",
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=10)
    ap.add_argument("--k", type=int, nargs="+", default=[2, 5, 10, 20])
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--permutations", type=int, default=1000)
    args = ap.parse_args(argv)
    prompts = [f"prompt {i}" for i in range(args.prompts)]
    print(f"{args.prompts} prompts, {args.seeds} simulated sweeps per K, "
          f"{args.permutations} permutations, alpha 0.05")  # fmt: skip
    print(f"{'K':>4} {'substituted':>12} {'shifted':>8} {'clean (FPR)':>12} {'s/sweep':>8}")
    for k in args.k:
        hits = {b: 0 for b in MODELS if b != "Ref"}
        started = time.perf_counter()
        for seed in range(args.seeds):
            rng = random.Random(seed)
            rows = [
                {"serving_provider": b, "prompt": p, "text": sample_answer(m, p, rng)}
                for b, m in MODELS.items()
                for p in prompts
                for _ in range(k)
            ]
            table = same_model(
                pd.DataFrame(rows), reference="Ref", permutations=args.permutations, seed=seed
            )
            for _, row in table.iterrows():
                hits[row["serving_provider"]] += row["same_model_verdict"] == VERDICT_DIFFERS
        per = (time.perf_counter() - started) / args.seeds
        share = {b: n / args.seeds for b, n in hits.items()}
        print(f"{k:>4} {share['Substituted']:>12.2f} {share['Shifted']:>8.2f} "
              f"{share['Clean']:>12.2f} {per:>8.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
