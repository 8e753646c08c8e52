"""The trainer and the cost model's simulator drive one step loop (``recipe.pc.step.StepLoop``): fed the trainer's
dataloader batches and rollouts, the simulator makes the trainer's steps, round by round."""

import numpy as np
import pytest
import torch
from support import env_file_logger
from verl import DataProto

from recipe.pc import metric_names as names
from recipe.pc.step import Generation
from recipe.pc.testing import build_trainer, step_records
from recipe.pc_tools.simulate import SimulatedRun


class Replay(SimulatedRun):
    """The simulator on a trainer's recorded run: its dataloader batches, and its rollouts' outcomes call by call."""

    def __init__(self, settings, batches, calls):
        self.batches, self.calls = list(batches), list(calls)
        p = np.zeros(1 + max(int(ids.max()) for ids in self.batches))
        # The trainer's allocator draws from default_rng(seed) alone; so does this one (rollouts are replayed).
        super().__init__(settings, p, np.random.default_rng(settings.seed), np.random.default_rng(0))

    def _dataloader(self):
        self.epoch = 0
        for ids in self.batches:
            yield DataProto.from_dict(tensors={"prompt": torch.zeros(len(ids), 1)}, non_tensors={"index": ids})

    def _generate(self, requests):
        call, rows, start = self.calls.pop(0), {}, 0
        for request in requests:
            out = request.prompts.repeat(request.n, interleave=True)
            stop = start + len(out)
            np.testing.assert_array_equal(out.non_tensor_batch["index"], call.prompt_ids[start:stop])
            out.non_tensor_batch["acc"] = np.asarray(call.correct[start:stop], dtype=np.float64)
            rows[request.name], start = out, stop
        return Generation(rows)


@pytest.mark.parametrize(
    "extra",
    [
        # A buffered pilot lives one step past its own: a simulator that flushed late (or early) commits others.
        ["algorithm.rollout_allocation=pilot_commit", "algorithm.buffer_max_off_steps=0"],
        ["algorithm.rollout_allocation=grpo", "data.gen_batch_size=4"],
        ["algorithm.rollout_allocation=dapo"],
    ],
    ids=["pilot_commit", "grpo", "dapo"],
)
def test_the_trainer_and_the_simulator_make_the_same_steps(tmp_path, tokenizer, extra):
    log = env_file_logger(tmp_path)
    trainer = build_trainer(tmp_path, tokenizer, extra=[*extra, "trainer.total_training_steps=6"])
    batches, to_prompts = [], trainer._to_prompts

    def recorded(batch_dict):
        prompts = to_prompts(batch_dict)
        batches.append(prompts.non_tensor_batch["index"].copy())
        return prompts

    trainer._to_prompts = recorded
    trainer.fit()
    steps = step_records(log)
    replay = Replay(trainer.pc, batches, trainer.async_rollout_manager.calls)
    simulated = [replay.step(number)[[0, 1, 2, 3, 6]].tolist() for number in range(1, len(steps) + 1)]
    keys = (names.ROUNDS, names.ROLLOUTS_PILOT, names.ROLLOUTS_COMMIT, names.PROMPTS_IN_BATCH, names.CANDIDATES)
    assert simulated == [[s[k] for k in keys] for s in steps]
    assert replay.calls == [] and len(steps) == 6
    assert sum(s[names.ROUNDS] for s in steps) > len(steps) or "grpo" in extra[0]  # steps of several rounds


@pytest.mark.parametrize("owner", ["allocator", "prompt_filter"])
def test_an_end_step_metric_named_like_the_trainers_is_refused(tmp_path, tokenizer, owner):
    """Catches: an allocator's (or prompt filter's) end_step metric silently overwriting one the trainer logs."""
    env_file_logger(tmp_path)
    trainer = build_trainer(tmp_path, tokenizer, extra=["trainer.total_training_steps=2"])
    hook = getattr(trainer, owner)
    end_step = hook.end_step
    hook.end_step = lambda *args: {**end_step(*args), names.CUMULATIVE_SAMPLED: 0}
    with pytest.raises(RuntimeError, match=r"end_step metrics \['rollout_stats/cumulative_rollouts_sample'\]"):
        trainer.fit()
    assert trainer.global_steps == 1


def test_the_allocator_and_the_prompt_filter_may_not_log_the_same_metric(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    trainer = build_trainer(tmp_path, tokenizer, extra=["algorithm.skip.enable=true"])
    trainer.allocator.end_step = lambda step: {names.SKIPPED: 1}
    with pytest.raises(RuntimeError, match=r"both log \['filtering_stats/skipped_count'\]"):
        trainer.loop.end_step(1, 0)
