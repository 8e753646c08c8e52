"""How far the reference preset's loss is from the authors' verl 0.5 once micro-batches are packed by verl 0.9.1.

With dynamic batch sizes (every paper script) both versions pack each rank's mini-batch into micro-batches of about
``ppo_max_token_len_per_gpu`` tokens, balanced by Karmarkar-Karp, starting from the largest micro-batch count any rank
asks for (ceil(tokens / max) on each rank, all-reduced with MAX): verl 0.5 balanced the rows' token counts at that
count; verl 0.9.1 balances a workload estimate (``calculate_workload``) and adds a micro-batch on every rank until
every micro-batch of every rank fits (``rearrange_micro_batches``). The reference loss weights each micro-batch's token
mean by its real rows, so which rows share a micro-batch changes each token's weight.

A step's last mini-batch is partial. verl 0.5 packed its real rows alone; on verl 0.9.1 the reference preset pads it to
a whole one with copies of its rows whose tokens carry no loss (``recipe.pc.minibatch.pad_partial_mini_batch``), and
verl packs copies and real rows together. The copies also cost a forward and a backward pass each.

The script draws every rank's rows of a step at a paper configuration's shape, packs the first mini-batch and the
last one of each rank both ways with verl 0.9.1's own partitioner, and reports the per-token gradient weight that
moves (L1, as a share of that mini-batch's weight under verl 0.5), beside what a plain token mean (verl 0.9.1's
``vanilla`` loss; for the last mini-batch at its share of rows) would move, and the padding's share of a rank's rows and
tokens in the update. Response lengths are drawn independently and uniformly, so which rows a rank holds does not
matter.

    python scripts/reference_packing.py    # Qwen3-4B PC: 32 ranks, 256 rows a rank = 5 x 48 + 16, 6,144 tokens
    python scripts/reference_packing.py --ranks 16 --rows 192 --step-rows 1024 --max-tokens 10240 \
        --response 100:8192 --draws 30      # 1.5B-like: 16 ranks, 1,024 rows a rank = 5 x 192 + 64 (minutes)
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from verl.utils.seqlen_balancing import calculate_workload, ceildiv, get_seqlen_balanced_partitions


def micro_batch_count(lengths_by_rank: list[list[int]], max_tokens: int) -> int:
    """The count both versions start from: ceil(tokens / max) on each rank (at most its rows), the largest of them."""
    return max(min(len(lengths), ceildiv(sum(lengths), max_tokens)) for lengths in lengths_by_rank)


def packing_05(lengths_by_rank: list[list[int]], max_tokens: int) -> list[list[list[int]]]:
    """verl 0.5's split of each rank's mini-batch: the common count, balanced on token counts."""
    count = micro_batch_count(lengths_by_rank, max_tokens)
    return [get_seqlen_balanced_partitions(lengths, count, equal_size=False) for lengths in lengths_by_rank]


def packing_091(lengths_by_rank: list[list[int]], max_tokens: int) -> list[list[list[int]]]:
    """verl 0.9.1's split: balanced on workload, one more micro-batch on every rank until all fit on all ranks."""
    workloads = [calculate_workload(torch.tensor(lengths, dtype=torch.long)).tolist() for lengths in lengths_by_rank]
    count = micro_batch_count(lengths_by_rank, max_tokens)
    while True:
        packed = []
        for lengths, workload in zip(lengths_by_rank, workloads, strict=True):
            parts = get_seqlen_balanced_partitions(workload, count, equal_size=False)
            if any(sum(lengths[i] for i in part) > max_tokens for part in parts):
                break  # verl's MIN all-reduce: one rank over the limit adds a micro-batch everywhere
            packed.append(parts)
        else:
            return packed
        count += 1


def padded(tail: np.ndarray, rows: int) -> np.ndarray:
    """A rank's partial mini-batch followed by the copies that fill it to ``rows``, as pad_partial_mini_batch adds."""
    return np.concatenate([tail, np.resize(tail, rows - len(tail))])


def token_weights(parts: list[list[int]], responses: np.ndarray, real: np.ndarray, mini_rows: int) -> np.ndarray:
    """Each row's weight per response token under the reference loss: its micro-batch's real rows over a whole
    mini-batch's, over the micro-batch's real response tokens; 0 for a padding row."""
    weights = np.zeros(len(responses))
    for part in parts:
        own = np.asarray(part)[real[part]]
        if len(own):
            weights[own] = len(own) / mini_rows / responses[own].sum()
    return weights


def difference(a: np.ndarray, b: np.ndarray, responses: np.ndarray) -> float:
    """Total |a - b| over every response token, as a share of a's total weight."""
    return float((np.abs(a - b) * responses).sum() / (a * responses).sum())


def measure(ranks: int, rows: int, step_rows: int, max_tokens: int, prompt: int, response: tuple[int, int], draws: int):
    """Per rank and draw: the weight moved in the first mini-batch (reference loss, token mean), in the last, partial
    one (the same), and the padding's share of the rank's update tokens."""
    partial = step_rows % rows
    if not partial:
        raise ValueError(f"{step_rows} rows a rank split into whole mini-batches of {rows}: no partial one to measure")
    rng = np.random.default_rng(0)
    real_whole = np.ones(rows, bool)
    real_tail = np.r_[np.ones(partial, bool), np.zeros(rows - partial, bool)]
    found = {key: [] for key in ("whole", "whole_token_mean", "last", "last_token_mean", "padding_tokens")}
    for _ in range(draws):
        responses = rng.integers(response[0], response[1] + 1, size=(ranks, step_rows))
        first, tails = responses[:, :rows], responses[:, step_rows - partial :]
        fills = np.stack([padded(tail, rows) for tail in tails])
        old = packing_05([(r + prompt).tolist() for r in first], max_tokens)
        new = packing_091([(r + prompt).tolist() for r in first], max_tokens)
        old_tail = packing_05([(r + prompt).tolist() for r in tails], max_tokens)
        new_tail = packing_091([(r + prompt).tolist() for r in fills], max_tokens)
        for rank in range(ranks):
            own, tail = first[rank], tails[rank]
            w05 = token_weights(old[rank], own, real_whole, rows)
            found["whole"].append(difference(w05, token_weights(new[rank], own, real_whole, rows), own))
            found["whole_token_mean"].append(difference(w05, np.full(rows, 1 / own.sum()), own))
            w05 = token_weights(old_tail[rank], tail, real_whole[:partial], rows)
            w091 = token_weights(new_tail[rank], fills[rank], real_tail, rows)[:partial]
            found["last"].append(difference(w05, w091, tail))
            found["last_token_mean"].append(difference(w05, np.full(partial, partial / rows / tail.sum()), tail))
        found["padding_tokens"] += list((fills[:, partial:] + prompt).sum(1) / (responses + prompt).sum(1))
    return {key: np.asarray(values) for key, values in found.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=32, help="data-parallel ranks (4B PC: 4 nodes x 8 GPUs)")
    ap.add_argument("--rows", type=int, default=48, help="rows of one rank's whole mini-batch (4B PC: 32 x 48 / 32)")
    ap.add_argument("--step-rows", type=int, default=256, help="rows a rank trains a step (4B PC: 128 x 64 / 32)")
    ap.add_argument("--max-tokens", type=int, default=6144, help="ppo_max_token_len_per_gpu (4B: 2048 + 4096)")
    ap.add_argument("--prompt", type=int, default=300, help="prompt tokens of a row")
    ap.add_argument("--response", default="100:4096", help="response tokens, drawn uniformly in LOW:HIGH")
    ap.add_argument("--draws", type=int, default=100, help="steps drawn (one mini-batch of each kind a rank each)")
    args = ap.parse_args(argv)
    low, high = (int(x) for x in args.response.split(":"))
    if args.prompt + high > args.max_tokens:
        ap.error(f"--prompt {args.prompt} + the longest --response {high} exceed --max-tokens {args.max_tokens}")
    found = measure(args.ranks, args.rows, args.step_rows, args.max_tokens, args.prompt, (low, high), args.draws)
    partial = args.step_rows % args.rows
    padding = args.rows - partial
    print(
        f"{args.ranks} ranks, {args.step_rows} rows a rank a step in mini-batches of {args.rows} "
        f"({args.step_rows // args.rows} whole, the last of {partial} padded with {padding} copies), micro-batches of "
        f"at most {args.max_tokens} tokens, {args.draws} steps drawn "
        f"({args.draws * args.ranks} mini-batches of each kind)"
    )
    print(
        "| per-token gradient weight that moves against verl 0.5's | whole mini-batch: mean | largest "
        "| last: mean | largest |"
    )
    print("|---|---|---|---|---|")
    for label, key in (("reference loss, verl 0.9.1's packing", ""), ("token mean, no reference loss", "_token_mean")):
        whole, last = found["whole" + key], found["last" + key]
        print(f"| {label} | {whole.mean():.1%} | {whole.max():.1%} | {last.mean():.1%} | {last.max():.1%} |")
    print(
        f"padding of the last mini-batch: +{padding / args.step_rows:.1%} rows and "
        f"+{found['padding_tokens'].mean():.1%} tokens (mean) in each rank's update"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
