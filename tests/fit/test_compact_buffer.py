"""Compact pilot storage and one-pass assembly give exactly the training batches of the previous code.

``OldAssemblyTrainer`` keeps, as the oracle, the assembly path the trainer had before the compact
buffer: full DataProto pilot rows in the buffer, select-then-concat per round and per step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch
from tensordict import TensorDict
from verl import DataProto

from recipe.pc.allocators.base import concat_rows
from recipe.pc.allocators.pilot_commit import PilotCommitAllocator
from recipe.pc.compact import CompactRows, Segment, assemble
from recipe.pc.pc_ray_trainer import RayPCTrainer
from recipe.pc.testing import assert_resumed_like, fit_run


@dataclass
class OldPilotRound:
    prompts: DataProto
    rollouts: DataProto
    n_pilot: int


@dataclass(frozen=True)
class OldPilotRef:
    round: OldPilotRound
    position: int


class OldAssemblyAllocator(PilotCommitAllocator):
    """The storage of the trainer before the compact buffer (the oracle)."""

    def _park_in_buffer(self, pilot_rows, prompts, first_rows, prompt_ids, values, step):
        from recipe.pc.allocation import group_rows

        prompt_pos = first_rows // self.pc.pilot.n
        rows = group_rows(first_rows, self.pc.pilot.n)
        kept_prompts = prompts.select_idxs(prompt_pos)
        kept_prompts.meta_info = {}
        pilot_round = OldPilotRound(kept_prompts, pilot_rows.select_idxs(rows), self.pc.pilot.n)
        group_values = values[rows].reshape(-1, self.pc.pilot.n)
        for position, prompt_id in enumerate(prompt_ids.tolist()):
            self.buffer.add(prompt_id, OldPilotRef(pilot_round, position), group_values[position], step)

    def _take_from_buffer(self, draws):
        if not draws:
            return None, []
        prompts = [d.entry.payload.round.prompts.select_idxs([d.entry.payload.position]) for d in draws]
        rollouts = [
            d.entry.payload.round.rollouts.select_idxs(d.entry.payload.position * self.pc.pilot.n + d.response_index)
            for d in draws
        ]
        return concat_rows(prompts, "buffered prompt rows"), [Segment(concat_rows(rollouts, "rollouts"))]


class OldAssemblyTrainer(RayPCTrainer):
    """The assembly of the trainer before the compact buffer, on the old storage (the oracle)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.allocator = self.loop.allocator = OldAssemblyAllocator(self.pc, self.rng)

    def _assemble_training_batch(self, step):
        parts = [seg.rows if seg.index is None else seg.rows.select_idxs(seg.index) for seg in step.segments]
        batch = concat_rows(parts, what="training contributions")
        uids, first, counts = np.unique(batch.non_tensor_batch["uid"], return_index=True, return_counts=True)
        assert (counts == self.pc.group_size).all() and len(uids) <= self.pc.train_batch_size
        if len(uids) < self.pc.train_batch_size:
            unit = self._trainable_unit()
            keep = np.sort(uids[np.argsort(first, kind="stable")][: len(uids) // unit * unit])
            step.unfilled_dropped_prompts = len(uids) - len(keep)
            batch = batch.select_idxs(np.isin(batch.non_tensor_batch["uid"], keep))
        batch.meta_info["temperature"] = self.config.actor_rollout_ref.rollout.temperature
        return batch


def snapshot(batch: DataProto) -> dict:
    """A deep copy of everything verl's update reads from the batch (tensors are reused across steps)."""
    return {
        "tensors": {k: v.clone() for k, v in batch.batch.items()},
        "tensor_order": list(batch.batch.keys()),
        "non_tensor": {k: v.copy() for k, v in batch.non_tensor_batch.items()},
        "meta": dict(batch.meta_info),
    }


def recording(cls):
    class Recording(cls):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.assembled = []

        def _assemble_training_batch(self, step):
            batch = super()._assemble_training_batch(step)
            self.assembled.append((self.global_steps, snapshot(batch), step.unfilled_dropped_prompts))
            return batch

    return Recording


def run(tmp_path, tokenizer, cls, extra, probs=None, name="run"):
    kwargs = {} if probs is None else {"probs": probs}
    return fit_run(tmp_path / name, tokenizer, extra, trainer_cls=recording(cls), **kwargs).trainer


def assert_same_batches(new, old):
    assert [s for s, _, _ in new] == [s for s, _, _ in old]
    for (step, a, cut_a), (_, b, cut_b) in zip(new, old, strict=True):
        assert cut_a == cut_b, step
        assert a["tensor_order"] == b["tensor_order"], step
        for key in b["tensors"]:
            x, y = a["tensors"][key], b["tensors"][key]
            assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), (step, key)
        assert a["non_tensor"].keys() == b["non_tensor"].keys(), step
        for key, y in b["non_tensor"].items():
            x = a["non_tensor"][key]
            assert x.dtype == y.dtype and x.shape == y.shape, (step, key)
            assert all(_same(u, v) for u, v in zip(x.tolist(), y.tolist(), strict=True)), (step, key)
        assert a["meta"] == b["meta"], step


def _same(u, v) -> bool:
    if isinstance(u, np.ndarray) or isinstance(v, np.ndarray):
        return np.array_equal(np.asarray(u, dtype=object), np.asarray(v, dtype=object))
    return type(u) is type(v) and u == v


CASES = {
    # several pilot rounds per step, reuse across an epoch boundary (carried partial batches), stale flushes
    "carry": ["trainer.total_training_steps=9"],
    "down_sampled_max_variance": [
        "algorithm.exploration.n_effective=2",
        "algorithm.mini_batch_unit=group",
        "trainer.total_training_steps=6",
    ],
    "down_sampled_first_n": [
        "algorithm.exploration.n_effective=3",
        "algorithm.mini_batch_unit=group",
        "algorithm.buffer_response_sampling_method=first_n",
        "algorithm.buffer_sampling_method=random",
        "trainer.total_training_steps=6",
    ],
    "seq_reward_metric": ["algorithm.agg_metric=seq_reward", "trainer.total_training_steps=4"],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_assembled_batches_equal_the_old_assembly(tmp_path, tokenizer, case):
    new = run(tmp_path, tokenizer, RayPCTrainer, CASES[case], name="new")
    old = run(tmp_path, tokenizer, OldAssemblyTrainer, CASES[case], name="old")
    assert len(new.assembled) >= 4
    assert_same_batches(new.assembled, old.assembled)


# Random prompt order: a cut segment's rows are then not the first rows of its pilot round.
@pytest.mark.parametrize("order", ["max_variance", "random"])
def test_unfilled_batches_are_cut_like_the_old_assembly(tmp_path, tokenizer, order):
    probs = [0.0] * 32 + [0.5] * 8
    extra = [
        "algorithm.max_num_gen_batches=2",
        "trainer.total_training_steps=4",
        f"algorithm.buffer_sampling_method={order}",
    ]
    new = run(tmp_path, tokenizer, RayPCTrainer, extra, probs=probs, name="new")
    old = run(tmp_path, tokenizer, OldAssemblyTrainer, extra, probs=probs, name="old")
    assert any(cut for _, _, cut in new.assembled)
    assert_same_batches(new.assembled, old.assembled)


@pytest.mark.slow  # three runs: the old assembly's, the new one's and its resume
def test_a_resumed_buffer_assembles_the_batches_of_the_uninterrupted_old_assembly(tmp_path, tokenizer):
    save = ["trainer.save_freq=3"]
    old = fit_run(
        tmp_path / "old", tokenizer, ["trainer.total_training_steps=7"], trainer_cls=recording(OldAssemblyTrainer)
    )
    fit_run(tmp_path / "cut", tokenizer, [*save, "trainer.total_training_steps=3"])
    resumed = fit_run(
        tmp_path / "cut", tokenizer, [*save, "trainer.total_training_steps=7"], trainer_cls=recording(RayPCTrainer)
    )
    assert_resumed_like(resumed, old, 3)
    assert_same_batches(resumed.trainer.assembled, old.trainer.assembled[3:])


def test_compact_rows_store_each_derivable_field_once(tmp_path, tokenizer):
    trainer = run(tmp_path, tokenizer, RayPCTrainer, ["trainer.total_training_steps=2"])
    rows = trainer.allocator.buffer.entries()[0].payload.round.rollouts
    kinds = {k: f.kind for k, f in rows.fields.items()}
    assert kinds == {
        "dummy_tensor": "per_group",
        "prompts": "per_group",
        "responses": "dense",
        "response_mask": "tail",
        "input_ids": "concat",
        "attention_mask": "dense",
        "position_ids": "positions",
        "rm_scores": "sparse",
        "token_level_scores": "alias",
        "rollout_log_probs": "dense",  # vLLM's own log-probs (rollout.calculate_log_probs, true by default)
    }
    assert rows.fields["responses"].data.dtype == torch.uint8  # the stand-in's token ids fit a byte
    assert rows.fields["attention_mask"].data.dtype == torch.bool


def test_layouts_that_break_a_derivation_are_stored_as_they_are():
    from tensordict import TensorDict

    n, group, p, r = 6, 3, 4, 5
    # Seeded: unseeded, all 30 response ids fell below 256 about once in 120 runs, and they were stored as uint8.
    gen = torch.Generator().manual_seed(0)
    prompts = torch.randint(3, 300, (n, p), generator=gen)
    responses = torch.randint(3, 300, (n, r), generator=gen)
    mask = torch.ones(n, p + r, dtype=torch.long)
    mask[1, 6:] = 0
    positions = torch.clamp(torch.cumsum(mask, 1) - 1, min=0)
    positions[4, 0] = 9  # not derivable from the mask
    response_mask = mask[:, p:].clone()
    response_mask[2, 1] = 0  # a tool-output token inside the response
    input_ids = torch.cat([prompts, responses], 1)
    input_ids[5, 0] = 1
    scores = torch.zeros(n, r)
    scores[0, 1:3] = 0.5  # two non-zeros in one row: not sparse
    td = TensorDict(
        {
            "prompts": prompts,
            "responses": responses,
            "attention_mask": mask,
            "input_ids": input_ids,
            "position_ids": positions,
            "response_mask": response_mask,
            "rm_scores": scores,
            "token_level_scores": scores + 1,
        },
        batch_size=[n],
    )
    rows = DataProto(batch=td, non_tensor_batch={"uid": np.arange(n).astype(object)})
    compact = CompactRows.from_proto(rows, group, groups=np.array([1, 0]))
    assert all(f.kind == "dense" for k, f in compact.fields.items() if k not in ("attention_mask",))
    assert compact.fields["responses"].data.dtype == torch.int16
    out = assemble([Segment(compact, np.array([5, 0, 3]))], None, "rows")
    source = np.array([2, 3, 0])  # kept rows are group 1 (rows 3-5) then group 0 (rows 0-2)
    for key in td.keys():
        assert torch.equal(out.batch[key], td[key][torch.from_numpy(source)]), key
    assert out.non_tensor_batch["uid"].tolist() == [2, 3, 0]


I32, I64 = torch.iinfo(torch.int32), torch.iinfo(torch.int64)


NARROWEST = [
    ([0, 1], torch.bool),
    ([0, 2], torch.uint8),  # one past a flag's range: a bool would bring 2 back as 1
    ([5, -1, 7], torch.int8),  # a negative value: an unsigned byte would bring -1 back as 255
    ([-1, 0], torch.int8),
    ([-128, 127], torch.int8),
    ([-129, 0], torch.int16),
    ([-128, 128], torch.int16),
    ([0, 127], torch.uint8),
    ([0, 255], torch.uint8),
    ([0, 256], torch.int16),
    ([-1, 255], torch.int16),
    ([-32768, 32767], torch.int16),
    ([-32769, 0], torch.int32),
    ([0, 32768], torch.int32),
    ([0, 65535], torch.int32),
    ([-65536, 65536], torch.int32),
    ([I32.min, I32.max], torch.int32),
    ([I32.min - 1, 0], torch.int64),
    ([0, I32.max + 1], torch.int64),
    ([I64.min, I64.max], torch.int64),
]


@pytest.mark.parametrize(("values", "stored"), NARROWEST, ids=[",".join(map(str, v)) for v, _ in NARROWEST])
@pytest.mark.parametrize("layout", ["per_group", "dense"])
def test_integer_fields_round_trip_in_the_narrowest_dtype_that_holds_them(values, stored, layout):
    row = torch.tensor(values, dtype=torch.int64)
    # Groups of 2: equal rows are stored once per group, differing rows (rolled by one) row by row.
    second = row if layout == "per_group" else row.roll(1)
    x = torch.stack([row, second, second, row])
    rows = DataProto(batch=TensorDict({"x": x}, batch_size=[4]), non_tensor_batch={"uid": np.arange(4)})
    compact = CompactRows.from_proto(rows, 2)
    field = compact.fields["x"]
    assert (field.kind, field.data.dtype) == (layout, stored)
    out = assemble([Segment(compact)], None, "rows").batch["x"]
    assert out.dtype == torch.int64 and torch.equal(out, x)
    # Through a checkpoint's plain form too: what is written is what comes back.
    again = CompactRows.from_plain(compact.to_plain(), compact.non_tensor)
    assert torch.equal(assemble([Segment(again, np.array([3, 0]))], None, "rows").batch["x"], x[[3, 0]])


def test_a_saved_buffer_takes_what_the_dry_run_counts_a_prompt(tmp_path, tokenizer):
    """The dry run's bytes a buffered prompt (``buffered_prompt_bytes``) are what a state file holds in tensors for
    each buffered prompt, and the rows' ids and reward values beside them add little."""
    from recipe.pc import checkpoint as ckpt
    from recipe.pc.compact import int_dtype_for
    from recipe.pc.dry_run import buffered_prompt_bytes

    # Responses of 64 tokens: the tensors dominate, as at real lengths, not the per-row values.
    extra = ["trainer.save_freq=2", "trainer.total_training_steps=2", "data.max_response_length=64"]
    run = fit_run(tmp_path, tokenizer, extra)
    buffered = torch.load(next(tmp_path.rglob(ckpt.STATE_FILE)), weights_only=True)["allocator"]["state"]["buffer"]
    prompts = len(buffered["prompt_id"])
    assert prompts >= 4  # a buffer worth measuring

    def nbytes(tree):
        if isinstance(tree, dict):
            return sum(nbytes(v) for v in tree.values())
        if isinstance(tree, list):
            return sum(nbytes(v) for v in tree)
        return tree.numel() * tree.element_size() if isinstance(tree, torch.Tensor) else 0

    config = run.trainer.config
    counted = buffered_prompt_bytes(
        config.data.max_prompt_length,
        config.data.max_response_length,
        config.algorithm.exploration.n,
        int_dtype_for(0, len(tokenizer) - 1).itemsize,
        log_probs=True,
    )
    fields = sum(nbytes(r["rollouts"]["fields"]) for r in buffered["rounds"]) / prompts
    assert counted <= fields <= 1.01 * counted
    assert nbytes(buffered["rounds"]) / prompts <= 1.1 * counted
