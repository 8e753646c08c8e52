"""The analytic cost model against its simulator, which drives the trainer's own allocators and prompt filter round by
round on Bernoulli rollouts (``recipe.pc_tools.simulate``), hundreds of steps a case; and GRESO skipping in the
simulator."""

import dataclasses

import numpy as np
import pytest

from recipe.pc.stages.skip import PromptSkipper
from recipe.pc_tools.costmodel import (
    DAPO,
    GRPO,
    PilotCommit,
    predict,
    simulate,
)
from recipe.pc_tools.defaults import SKIP

DISTRIBUTIONS = {
    "hard": lambda rng: rng.beta(0.3, 3.0, size=3000),
    "u-shaped": lambda rng: rng.beta(0.2, 0.6, size=3000),
    "half-unsolvable": lambda rng: np.concatenate([np.zeros(1500), rng.uniform(0, 1, 1500)]),
}
CONFIGS = [
    DAPO(8, 64, 32),
    DAPO(8, 64, 32, max_num_gen_batches=2),
    PilotCommit(4, 12, 96, 32),
    PilotCommit(4, 12, 96, 32, buffer_max_off_steps=0),
    PilotCommit(2, 14, 96, 32, buffer_max_off_steps=1),
    PilotCommit(4, 12, 64, 32, buffer_max_off_steps=0, max_num_gen_batches=3),
    # band edges at 0: flat pilots are inside the band but still fail the filter
    PilotCommit(8, 8, 64, 32, p_lower=0.0),
    PilotCommit(8, 8, 64, 32, p_upper=0.0),
    # the stages: screening pilots and PODS down-sampling
    PilotCommit(4, 12, 96, 32, screen_n=2),
    PilotCommit(8, 8, 48, 16, screen_n=3, buffer_max_off_steps=1),
    PilotCommit(4, 12, 96, 32, downsample_n=24),
    GRPO(8, 32, downsample_n=16),
    DAPO(8, 64, 32, downsample_n=16),
]


@pytest.mark.slow  # 13 configurations x 800 simulated steps
@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_analytic_agrees_with_simulator(dist):
    p = DISTRIBUTIONS[dist](np.random.default_rng(11))
    for config in CONFIGS:
        exact, sim = predict(p, config), simulate(p, config, steps=800, seed=5)
        for field in ("rounds_per_step", "rollouts_per_step", "trained_groups_per_step"):
            assert getattr(exact, field) == pytest.approx(getattr(sim, field), rel=0.03), (config.label, field)
        # The simulator counts passes and candidates as the trainer logs them (screened-out prompts included).
        assert exact.filter_pass_rate == pytest.approx(sim.filter_pass_rate, rel=0.03, abs=0.002), config.label


def test_pc_carry_over_beats_memoryless_rounds():
    """With supply just under demand the buffer carry-over matters: more staleness, fewer rounds."""
    p = DISTRIBUTIONS["hard"](np.random.default_rng(11))
    fresh_only = predict(p, PilotCommit(4, 12, 96, 32, buffer_max_off_steps=0)).rounds_per_step
    carried = predict(p, PilotCommit(4, 12, 96, 32, buffer_max_off_steps=4)).rounds_per_step
    assert 1.0 < carried < fresh_only - 0.1


# ---------------------------------------------------------------------- GRESO skipping in the simulator
HALF_UNSOLVED = np.r_[np.zeros(300), np.full(300, 0.5)]


def skipping_run(prompts: int, size: int, hopeless: int, seed: int = 0):
    """A simulated GRPO run over ``prompts`` prompts, rounds of ``size``, skipping with no exploration floor and
    prompts 0..hopeless-1 on long all-wrong streaks (kept with chance 0.5 ** 60)."""
    from recipe.pc_tools.costmodel import _settings
    from recipe.pc_tools.simulate import SimulatedRun

    settings = _settings(GRPO(4, size))
    skip = dataclasses.replace(SKIP, enable=True, explore_floor=0.0)
    settings = dataclasses.replace(settings, owned={**settings.owned, skip.name: skip})
    run = SimulatedRun(settings, np.full(prompts, 0.5), *rngs(seed))
    run.prompt_filter.skipper.streaks = {i: -60 for i in range(hopeless)}
    return run


def rngs(seed):
    return np.random.default_rng(seed), np.random.default_rng([seed, 1])


def test_the_simulator_pools_kept_prompts_into_rounds_with_the_trainers_filter():
    run = skipping_run(100, 16, hopeless=30, seed=3)
    reference = np.random.default_rng(3)  # the same dataloader, unskipped: 6 batches an epoch
    batches = [reference.permutation(100)[: 6 * 16].reshape(6, 16) for _ in range(4)]  # 4 epochs
    # Every round is full: 70 kept prompts an epoch make 4 rounds and 6 left, which wait for the next epoch's; a
    # batch's kept prompt already waiting is not pooled again.
    want, pool = [], []
    for batch in np.concatenate(batches):
        pool += [pid for pid in batch[batch >= 30].tolist() if pid not in pool]
        while len(pool) >= 16:
            want, pool = want + pool[:16], pool[16:]
    rounds = [next(run.rounds).non_tensor_batch["index"] for _ in range(len(want) // 16)]
    assert [len(r) for r in rounds] == [16] * len(rounds) and run.epoch == 3
    np.testing.assert_array_equal(np.concatenate(rounds), want)


def test_a_prompt_waiting_for_a_round_is_not_pooled_twice():
    run = skipping_run(20, 4, hopeless=15)  # 5 of 20 prompts kept: one waits at each epoch's end
    rounds = [next(run.rounds).non_tensor_batch["index"].tolist() for _ in range(50)]
    assert all(len(set(r)) == 4 and min(r) >= 15 for r in rounds)


def test_the_simulator_gives_up_when_no_round_can_fill():
    run = skipping_run(20, 4, hopeless=18)  # only 2 of 20 prompts can be kept: never a round of 4
    with pytest.raises(RuntimeError, match="kept fewer than 4 prompts in 100 epochs"):
        run.step(1)


MOSTLY_UNSOLVED = np.r_[np.zeros(480), np.full(120, 0.5)]


@pytest.mark.parametrize(
    "config",
    [GRPO(16, 32), DAPO(16, 96, 32), PilotCommit(4, 12, 96, 32), PilotCommit(4, 12, 96, 32, screen_n=2)],
    ids=lambda c: c.label,
)
@pytest.mark.slow  # 420 simulated steps a configuration
def test_skipping_saves_on_prompts_that_never_vary(config):

    rates = HALF_UNSOLVED if isinstance(config, GRPO) else MOSTLY_UNSOLVED  # DAPO: more than one round a step
    plain = simulate(rates, config, steps=150, warmup=60, seed=1)
    skipping = simulate(rates, config, steps=150, warmup=60, seed=1, skip=SKIP)
    assert skipping.label == plain.label + " skip"
    assert skipping.trained_groups_per_step == pytest.approx(32)
    if isinstance(config, GRPO):  # about the same rollouts a step, on prompts that vary more often
        assert skipping.informative_groups_per_step > 1.4 * plain.informative_groups_per_step
    elif isinstance(config, DAPO):  # the same kept groups from fewer generated ones
        assert skipping.rollouts_per_step < 0.95 * plain.rollouts_per_step
    elif config.screen_n is None:  # fewer rounds of pilots, most of them on unsolved prompts
        assert skipping.pilot_rollouts_per_step < 0.8 * plain.pilot_rollouts_per_step
    else:
        # The trainer feeds the history every screen that agreed, as a group: screens of 2 agree half the time even
        # at pass rate 0.5, so the adaptive keep probabilities fall to p_min and nearly every prompt with a streak
        # is skipped. Kept prompts short of a round wait for the next epoch's, so rounds stay full and the ones
        # that remain land in the band more often: fewer rounds.
        assert skipping.rounds_per_step < 0.8 * plain.rounds_per_step


_RealSkipper = PromptSkipper


class _RecordingSkipper:
    """Wraps the trainer's PromptSkipper: the groups it is fed and the epochs its steps end in."""

    log: list = []

    def __new__(cls, rule):
        class Recording(_RealSkipper):
            def observe(self, stats):
                cls.log.append(
                    ("groups", [(int(c), float(sd)) for st in stats for c, sd in zip(st.count, st.std, strict=True)])
                )
                super().observe(stats)

            def end_step(self, epoch):
                cls.log.append(("end", epoch))
                return super().end_step(epoch)

        return Recording(rule)


@pytest.mark.parametrize(
    "config,sizes",
    [
        (GRPO(16, 32), {16}),  # every generated group, surplus ones included
        (GRPO(16, 32, downsample_n=24), {24}),  # PODS: the generated rows, not the trained ones
        (PilotCommit(4, 12, 96, 32), {4}),  # pilots only, never commits
        (PilotCommit(4, 12, 96, 32, screen_n=2), {2, 4}),  # screens that agreed, and completed pilots
    ],
    ids=["grpo", "grpo pods", "pc", "pc screen"],
)
def test_the_skip_history_gets_the_groups_the_trainer_reports_and_its_epoch(monkeypatch, config, sizes):
    import recipe.pc.stages.skip as skip_stage

    _RecordingSkipper.log = []
    monkeypatch.setattr(skip_stage, "PromptSkipper", _RecordingSkipper)
    simulate(HALF_UNSOLVED, config, steps=30, warmup=0, seed=2, skip=SKIP)
    groups = [g for kind, entry in _RecordingSkipper.log if kind == "groups" for g in entry]
    assert {count for count, _ in groups} == sizes
    screen = getattr(config, "screen_n", None)
    if screen:
        assert all(std == 0 for count, std in groups if count == screen)
    # Nothing is skipped in the first epoch (no prompt has a history yet), so its rounds are whole: a GRPO step is one
    # round of 32 of the 600 prompts, and the first 18 steps end in epoch 0, the 19th in epoch 1.
    if isinstance(config, GRPO):
        ends = [entry for kind, entry in _RecordingSkipper.log if kind == "end"]
        assert ends[:19] == [0] * 18 + [1]


def test_skipping_changes_nothing_until_a_prompt_comes_back():

    many = np.random.default_rng(5).random(3000)  # 30 steps of 32 never reach a prompt twice
    plain = simulate(many, GRPO(16, 32), steps=30, warmup=0)
    skipping = simulate(many, GRPO(16, 32), steps=30, warmup=0, skip=SKIP)
    assert dataclasses.replace(skipping, label=plain.label) == plain


def test_each_simulated_run_draws_its_own_prompts():
    with pytest.raises(ValueError, match="fewer than one generation batch"):
        simulate(np.array([0.0, 0.5]), GRPO(16, 32), steps=1, warmup=0)
    # Half the drawn prompts vary (almost surely); over 400 runs of one step their mean is 16 only if each run draws
    # its own 32 prompts: one shared draw would give its own share for every run.
    pooled = simulate(np.array([0.0, 0.5]), GRPO(16, 32), steps=1, warmup=0, runs=400, prompts=32)
    assert pooled.informative_groups_per_step == pytest.approx(16, abs=0.5)


def test_a_step_cut_at_the_round_limit_trains_only_with_min_train_prompts_as_the_trainers_does():
    """Two rounds a step of 8 prompts, 4 of 32 in the band on average an epoch: steps often end short of 4 prompts,
    unless algorithm.min_train_prompts=4 keeps them going until they have 4."""
    from recipe.pc_tools.costmodel import compose_settings
    from recipe.pc_tools.simulate import SimulatedRun

    p = np.r_[np.full(4, 0.5), np.zeros(28)]
    base = ["data.train_batch_size=4", "data.gen_batch_size=8", "algorithm.exploration.n=4"]
    base += ["actor_rollout_ref.rollout.n=4", "algorithm.max_num_gen_batches=2"]
    committed = {}
    for floor in ("null", "4"):
        run = SimulatedRun(compose_settings([*base, f"algorithm.min_train_prompts={floor}"]), p, *rngs(0))
        committed[floor] = [run.step(number)[3] for number in range(1, 11)]
    assert min(committed["null"]) < 4 and committed["4"] == [4] * 10
