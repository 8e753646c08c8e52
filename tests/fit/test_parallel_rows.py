"""Row arithmetic over data-parallel ranks through the real fit() at dp 8.

verl 0.9.1's engine (``prepare_micro_batches``) asserts that each rank's rows split into whole micro-batches
when dynamic batch sizes are off; the tests run that very function on every rank's rows of every actor call.
"""

from collections import Counter

import pytest
from support import env_file_logger
from verl.utils import tensordict_utils as tu
from verl.workers.engine.utils import prepare_micro_batches

import recipe.pc.generation as generation_module
from recipe.pc import metric_names as names
from recipe.pc.parallel import trainable_unit
from recipe.pc.settings import PCConfigError
from recipe.pc.testing import LOG_PROB, REF, UPDATE, build_trainer, step_records

# ---------------------------------------------------------------------- the real fit() at dp 8
DP = 8


class VerlSplitRecorder:
    """Splits every actor call's rows over the ranks as verl's dispatch does and runs verl's micro-batch split."""

    def __init__(self, trainer, log_prob: int, update: int):
        self.trainer, self.log_prob, self.update = trainer, log_prob, update
        self.calls = []  # (kind, rows, rows per rank, mini-batches per rank)
        group = trainer.actor_rollout_wg
        self._log_prob_fn, self._update_fn = group.compute_log_prob, group.update_actor
        group.compute_log_prob, group.update_actor = self.compute_log_prob, self.update_actor

    def _ranks(self, data):
        parts = tu.chunk_tensordict(data, DP)
        assert len({len(p) for p in parts}) == 1, "ranks got unequal rows"
        return parts

    def compute_log_prob(self, data):
        for part in self._ranks(data):
            tu.assign_non_tensor(part, use_dynamic_bsz=False, micro_batch_size_per_gpu=self.log_prob)
            prepare_micro_batches(part)
        self.calls.append(("compute_log_prob", len(data), len(data) // DP, None))
        return self._log_prob_fn(data)

    def update_actor(self, data):
        mini_per_rank = tu.get_non_tensor_data(data, "mini_batch_size", None) // DP
        minis = []
        for part in self._ranks(data):
            batches = list(tu.make_iterator(part, mini_batch_size=mini_per_rank, epochs=1))
            for mini_batch in batches:
                tu.assign_non_tensor(mini_batch, use_dynamic_bsz=False, micro_batch_size_per_gpu=self.update)
                prepare_micro_batches(mini_batch)
            minis.append(len(batches))
        assert len(set(minis)) == 1
        self.calls.append(("update_actor", len(data), len(data) // DP, minis[0]))
        return self._update_fn(data)


def record_padding(monkeypatch, trainer):
    pads = []  # (step, rows, divisor, padding rows)
    real = generation_module.pad_dataproto_to_divisor

    def recording(data, divisor):
        padded, pad = real(data, divisor)
        pads.append((trainer.global_steps, len(data), divisor, pad))
        return padded, pad

    monkeypatch.setattr(generation_module, "pad_dataproto_to_divisor", recording)
    return pads


def micro_overrides(log_prob, update):
    return [f"{LOG_PROB}={log_prob}", f"{UPDATE}={update}", f"{REF}={log_prob}"]


GRPO = ["algorithm.rollout_allocation=grpo", "data.gen_batch_size=4"]


@pytest.mark.parametrize(
    "extra, rows, log_prob, update",
    [
        # 4 prompts x (4 pilots + 4 commits) = 32 rows: 4 per rank, mini-batches of 4 x 4 = 16 rows (2 per rank).
        pytest.param([], 32, 4, 2, id="pilot_commit"),
        # GRPO: 4 prompts x 4 = 16 rows: 2 per rank, one mini-batch of 16 rows (2 per rank).
        pytest.param(GRPO, 16, 2, 1, id="grpo"),
    ],
)
def test_dp8_rows_padding_and_mini_batches(tmp_path, tokenizer, monkeypatch, extra, rows, log_prob, update):
    log = env_file_logger(tmp_path)
    trainer = build_trainer(
        tmp_path,
        tokenizer,
        dp_size=DP,
        agent_workers=3,
        extra=[*extra, *micro_overrides(log_prob, update)],
    )
    recorder = VerlSplitRecorder(trainer, log_prob, update)
    pads = record_padding(monkeypatch, trainer)
    trainer.fit()
    steps = step_records(log)
    assert len(steps) == 9

    # Every generation batch is padded to lcm(3 agent workers, 8 ranks) = 24 rows, with the fewest rows.
    assert pads and all(divisor == 24 and pad == (-n) % 24 for _, n, divisor, pad in pads)
    assert any(pad for *_, pad in pads)  # the configuration does exercise padding
    for number, record in enumerate(steps, start=1):
        expected = sum(pad for step, _, _, pad in pads if step == number)
        assert record[names.ROLLOUTS_PADDING] == expected
    generated = sum(n for _, n, _, _ in pads)
    assert trainer.counters.cumulative_rollouts == generated  # padding rows are not counted as rollouts
    assert sum(c.num_rows for c in trainer.async_rollout_manager.calls) == generated + sum(p[3] for p in pads)

    # Each actor call carries the step's rows, rows / 8 per rank, each group whole: no padding row is trained.
    group = trainer.pc.group_size
    assert [c[0] for c in recorder.calls] == ["compute_log_prob", "update_actor"] * 9
    assert all(c[1] == rows and c[2] == rows // DP for c in recorder.calls)
    for call in (c for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"):
        assert set(Counter(call.uids).values()) == {group} and len(call.uids) == rows
    mini_rows = 4 * trainer.pc.n_commit
    assert all(c[3] == rows // mini_rows for c in recorder.calls if c[0] == "update_actor")
    assert all(r[names.PPO_MINI_BATCHES] == rows // mini_rows for r in steps)
    assert all(r[names.OPTIMIZER_STEPS] == rows // mini_rows for r in steps)


@pytest.mark.parametrize("extra", [pytest.param([], id="pilot_commit"), pytest.param(GRPO, id="grpo")])
def test_dp8_micro_size_that_does_not_divide_is_refused_before_the_first_generation(tmp_path, tokenizer, extra):
    env_file_logger(tmp_path)
    trainer = build_trainer(
        tmp_path,
        tokenizer,
        dp_size=DP,
        agent_workers=3,
        extra=[*extra, *micro_overrides(8, 1)],
    )
    with pytest.raises(PCConfigError, match=f"^{LOG_PROB}=8 does not divide .* / 8 ranks = [24] rows per rank"):
        trainer.fit()
    assert trainer.async_rollout_manager.calls == [] and trainer.actor_rollout_wg.calls == []


def test_dp8_unfilled_batch_is_cut_to_a_unit_that_splits_into_micro_batches(tmp_path, tokenizer, monkeypatch):
    """Hard data and one round a step: unfilled batches train in multiples of the unit the micro size sets."""
    log = env_file_logger(tmp_path)
    probs = [0.0] * 30 + [0.5] * 10
    extra = [
        "data.train_batch_size=8",
        "algorithm.buffer_size=64",
        "algorithm.max_num_gen_batches=2",
        "data.gen_batch_size=8",
        *micro_overrides(4, 2),
    ]
    trainer = build_trainer(tmp_path, tokenizer, probs=probs, dp_size=DP, agent_workers=3, extra=extra)
    recorder = VerlSplitRecorder(trainer, 4, 2)
    trainer.fit()
    # Rows unit lcm(16-row mini-batch, 8 ranks x 4 micro) = 32 rows = 4 prompts (without the micro size: 2).
    assert trainer._trainable_unit() == 4
    assert trainable_unit(trainer.pc, DP, 4) == 2
    trained = [c[1] for c in recorder.calls if c[0] == "update_actor"]
    assert trained and all(r % 32 == 0 for r in trained)
    assert any(r < 64 for r in trained), "no unfilled batch was trained"
    assert [r[names.PROMPTS_IN_BATCH] for r in step_records(log)] == [r // 8 for r in trained]
