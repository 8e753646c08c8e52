"""How far the reference preset's loss is from the authors' verl 0.5 once micro-batches are packed by verl 0.9.1.

With dynamic batch sizes (every paper script) both versions pack a rank's mini-batch into micro-batches of at most
``ppo_max_token_len_per_gpu`` tokens, balanced by Karmarkar-Karp, but on different keys: verl 0.5 on the rows'
token counts, with the fewest micro-batches that fit on average; verl 0.9.1 on a workload estimate
(``calculate_workload``), adding micro-batches until every one fits. The reference loss weights each micro-batch's
token mean by its rows, so which rows share a micro-batch changes each token's weight. This script draws
mini-batches of a paper configuration's shape, packs each both ways with verl 0.9.1's own partitioner, and reports
the difference in per-token gradient weight (L1, as a share of the total), beside the difference verl 0.9.1's plain
token mean would make (what the reference loss removes).

    python scripts/reference_packing.py [--rows 48] [--max-tokens 6144] [--prompt 300] [--response 100:4096]
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from verl.utils.seqlen_balancing import calculate_workload, ceildiv, get_seqlen_balanced_partitions


def packing_05(lengths: list[int], max_tokens: int) -> list[list[int]]:
    """verl 0.5's split: ceil(total / max) micro-batches, balanced on token counts."""
    count = min(len(lengths), ceildiv(sum(lengths), max_tokens))
    return get_seqlen_balanced_partitions(lengths, count, equal_size=False)


def packing_091(lengths: list[int], max_tokens: int) -> list[list[int]]:
    """verl 0.9.1's split: balanced on workload, more micro-batches until each holds at most ``max_tokens``."""
    workloads = calculate_workload(torch.tensor(lengths, dtype=torch.long)).tolist()
    count = min(len(lengths), ceildiv(sum(lengths), max_tokens))
    while True:
        parts = get_seqlen_balanced_partitions(workloads, count, equal_size=False)
        if all(sum(lengths[i] for i in part) <= max_tokens for part in parts) or count == len(lengths):
            return parts
        count += 1


def token_weights(parts: list[list[int]], responses: np.ndarray, rows: int) -> np.ndarray:
    """Each row's weight per response token: its micro-batch's rows over the mini-batch's, over its tokens."""
    weights = np.zeros(len(responses))
    for part in parts:
        weights[part] = len(part) / rows / responses[part].sum()
    return weights


def difference(a: np.ndarray, b: np.ndarray, responses: np.ndarray) -> float:
    """Total |a - b| over every response token, as a share of a's total weight (which is 1)."""
    return float((np.abs(a - b) * responses).sum() / (a * responses).sum())


def measure(rows: int, max_tokens: int, prompt: int, response: tuple[int, int], draws: int, seed: int = 0):
    """Mean and largest difference over ``draws`` random mini-batches: (0.5 vs 0.9.1 packing, 0.5 vs token mean)."""
    rng = np.random.default_rng(seed)
    packing, token_mean = [], []
    for _ in range(draws):
        responses = rng.integers(response[0], response[1] + 1, size=rows)
        lengths = (responses + prompt).tolist()
        w05 = token_weights(packing_05(lengths, max_tokens), responses, rows)
        w091 = token_weights(packing_091(lengths, max_tokens), responses, rows)
        packing.append(difference(w05, w091, responses))
        token_mean.append(difference(w05, np.full(rows, 1.0 / responses.sum()), responses))
    return (np.mean(packing), np.max(packing)), (np.mean(token_mean), np.max(token_mean))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=48, help="rows of one rank's mini-batch (4B PC: 32 x 48 / 32)")
    ap.add_argument("--max-tokens", type=int, default=6144, help="ppo_max_token_len_per_gpu (4B: 2048 + 4096)")
    ap.add_argument("--prompt", type=int, default=300, help="prompt tokens of a row")
    ap.add_argument("--response", default="100:4096", help="response tokens, drawn uniformly in LOW:HIGH")
    ap.add_argument("--draws", type=int, default=200)
    args = ap.parse_args(argv)
    low, high = (int(x) for x in args.response.split(":"))
    (p_mean, p_max), (t_mean, t_max) = measure(args.rows, args.max_tokens, args.prompt, (low, high), args.draws)
    print(f"mini-batch of {args.rows} rows, micro-batches of at most {args.max_tokens} tokens, {args.draws} draws")
    print("| per-token gradient weight against verl 0.5's | mean | largest |")
    print("|---|---|---|")
    print(f"| reference loss, verl 0.9.1's packing | {p_mean:.1%} | {p_max:.1%} |")
    print(f"| verl 0.9.1's token mean (no reference loss) | {t_mean:.1%} | {t_max:.1%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
