"""An allocator driven round by round, without a trainer: its ``plan`` for some prompts, made-up generated rows for
each request, its ``absorb``, and the step's running counts, as ``recipe.pc.step.StepLoop`` runs one round.

    from recipe.pc.testing import allocator, play_round, prompt_rows, rollout_rows

    alloc, state = allocator("pilot_commit", ["algorithm.exploration.n=4"]), StepState()
    requests, result = play_round(alloc, state, prompt_rows([100, 101]), lambda requests: {...})
"""

from __future__ import annotations

import numpy as np
import torch
from verl import DataProto


def play_round(alloc, state, prompts: DataProto, outcomes, step: int = 1):
    """One round as the trainer runs it: ``plan``, the generated rows (``outcomes(requests)``: a request's name to its
    rows), ``absorb``, and the result folded into ``state`` (a ``recipe.pc.step.StepState``). Returns the requests and
    the round's result."""
    view = state.view(step, alloc.pc.train_batch_size)
    plan = alloc.plan(prompts, view)
    generated = outcomes(plan.requests)
    result = alloc.absorb(plan, generated, view)
    state.fold(result)
    return plan.requests, result


def prompt_rows(ids, uids=None) -> DataProto:
    """Dataloader rows: only the prompt id (and, where a group's rows are checked, its uid) matters to an allocator."""
    ids = np.asarray(ids, dtype=np.int64)
    non_tensors = {"index": ids} if uids is None else {"index": ids, "uid": np.asarray(uids, dtype=object)}
    return DataProto.from_dict(tensors={"prompt": torch.from_numpy(ids)[:, None]}, non_tensors=non_tensors)


def rollout_rows(ids, values, metric: str = "acc") -> DataProto:
    """Generated rows as ``absorb`` gets them: a prompt id a row, a prompt's rows consecutive, ``values`` its reward
    metric; each row's response tags it (prompt id, position in its group)."""
    ids, values = np.asarray(ids, dtype=np.int64), np.asarray(values, dtype=np.float64)
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    position = np.arange(len(ids)) - first[inverse]
    responses = torch.from_numpy(np.stack([ids, position], axis=1))
    return DataProto.from_dict(tensors={"responses": responses}, non_tensors={"index": ids, metric: values})


def pilot_of(correct_counts, n: int, first_id: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Prompt ids and values of a pilot of ``n`` rollouts a prompt: prompt ``first_id + i`` has ``correct_counts[i]``
    correct (1.0, first) and the rest wrong (0.0)."""
    ids = np.repeat(np.arange(first_id, first_id + len(correct_counts)), n)
    values = np.concatenate([[1.0] * c + [0.0] * (n - c) for c in correct_counts])
    return ids, values
