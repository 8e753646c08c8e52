"""Label the grader corpus with the authors' own ``tinker_sympy`` grader (Pilot-Commit release).

Loads ``verl/utils/reward_score`` from a checkout of ``databricks/pilot-commit`` at run time, without
running the checkout's top-level ``verl/__init__.py`` or ``verl/utils/__init__.py`` (they import torch,
ray, ...): empty stand-in packages named ``verl`` and ``verl.utils`` point at the checkout's folders, so
only the reward-score package and what it imports (``verl.utils.import_utils``) are executed. Every pair
then goes through the same call the authors' trainer makes, ``default_compute_score(data_source,
response, ground_truth, extra_info=None, verifier="tinker_sympy")``, which routes to
``math_tinker.compute_score`` (boxed extraction, then grading under a 1 s SIGALRM timeout). Calls run
one by one in the main thread, as SIGALRM requires.

Output: ``tests/data/grader/labels.jsonl``; first line ``{"authors_repo", "commit", "corpus_sha256"}``,
then ``{"id", "score", "acc", "pred"}`` per pair, in corpus order.

Dependencies (pure Python, in the project venv): sympy (1.14.0), pylatexenc (2.11), and math-verify
(0.9.0, with latex2sympy2_extended) because the authors' reward-score package imports it at load time.
Install with ``.venv/bin/pip install sympy pylatexenc math-verify`` if missing.

Run from the repository root:

    .venv/bin/python scripts/grader/label_corpus.py --authors-repo /tmp/authors-pc --commit SHA \\
        [--corpus tests/data/grader/corpus.jsonl] [--out tests/data/grader/labels.jsonl]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import sys
import time
import types
from collections import Counter
from pathlib import Path

NEEDED = [
    "verl/utils/reward_score/__init__.py",
    "verl/utils/reward_score/math_tinker.py",
    "verl/utils/reward_score/tinker_utils.py",
    "verl/utils/import_utils.py",
]
DATA_SOURCE = "math_dapo"  # any of the sources the authors route to their math verifiers
TIMEOUT_PRED = "[TIMEOUT]"


def load_authors_router(repo: Path):
    """The authors' ``default_compute_score``, imported from ``repo`` without their heavy package inits."""
    for name in ("verl", "verl.utils"):
        if name in sys.modules:
            raise SystemExit(f"{name} is already imported; run this script in a fresh interpreter")
        pkg = types.ModuleType(name)
        pkg.__path__ = [str(repo / name.replace(".", "/"))]
        sys.modules[name] = pkg
    scores = importlib.import_module("verl.utils.reward_score")
    if not hasattr(scores, "math_tinker"):
        raise SystemExit("the authors' reward_score package did not load math_tinker (is math-verify installed?)")
    return scores.default_compute_score


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--authors-repo", type=Path, required=True, help="work-tree checkout of databricks/pilot-commit")
    ap.add_argument("--commit", required=True, help="the commit the checkout was made from (recorded in the output)")
    ap.add_argument("--corpus", type=Path, default=Path("tests/data/grader/corpus.jsonl"))
    ap.add_argument("--out", type=Path, default=Path("tests/data/grader/labels.jsonl"))
    args = ap.parse_args()

    repo = args.authors_repo.resolve()
    missing = [p for p in NEEDED if not (repo / p).is_file()]
    if missing:
        raise SystemExit(f"refusing: {repo} is not a pilot-commit checkout (missing {', '.join(missing)})")

    corpus_bytes = args.corpus.read_bytes()
    rows = [json.loads(line) for line in corpus_bytes.decode("utf-8").splitlines() if line.strip()]
    compute_score = load_authors_router(repo)

    header = {
        "authors_repo": "databricks/pilot-commit",
        "commit": args.commit,
        "corpus_sha256": hashlib.sha256(corpus_bytes).hexdigest(),
    }
    labels, accepted, rejected, timed_out = [], Counter(), Counter(), []
    slowest = (0.0, None)
    start = time.perf_counter()
    for row in rows:
        t0 = time.perf_counter()
        res = compute_score(DATA_SOURCE, row["response"], row["ground_truth"], extra_info=None, verifier="tinker_sympy")
        slowest = max(slowest, (time.perf_counter() - t0, row["id"]))
        labels.append({"id": row["id"], "score": res["score"], "acc": bool(res["acc"]), "pred": res["pred"]})
        (accepted if res["acc"] else rejected)[row["category"]] += 1
        if res["pred"] == TIMEOUT_PRED:
            timed_out.append(row["id"])
    elapsed = time.perf_counter() - start

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for obj in [header, *labels]:
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")

    print(f"labelled {len(rows)} pairs at {args.commit} in {elapsed:.1f} s -> {args.out}")
    print(f"{'category':16s} accept reject")
    for cat in dict.fromkeys(r["category"] for r in rows):
        print(f"{cat:16s} {accepted[cat]:6d} {rejected[cat]:6d}")
    print(f"{'total':16s} {sum(accepted.values()):6d} {sum(rejected.values()):6d}")
    print(f"slowest pair: {slowest[1]} ({slowest[0] * 1000:.1f} ms)")
    print(f"timed out / errored ({TIMEOUT_PRED}): {len(timed_out)} {timed_out[:10]}")


if __name__ == "__main__":
    main()
