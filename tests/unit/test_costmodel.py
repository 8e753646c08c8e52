"""The cost model: binomial arithmetic and exact degenerate cases (the analytic model against its simulator, which runs
the trainer's allocators for hundreds of steps: tests/fit/test_costmodel_simulator.py)."""

import dataclasses
import itertools
import math

import numpy as np
import pytest

from recipe.pc.allocation import classify_pilot
from recipe.pc.settings import PCConfigError
from recipe.pc_tools.costmodel import (
    DAPO,
    GRPO,
    PilotCommit,
    band_pass_prob,
    binomial_pmf,
    nonzero_variance_prob,
    predict,
    predict_at_filter_rate,
    screened_pilot_probs,
    simulate,
)

# The exact numbers below are for steps without a round limit; a configuration's default is the trainer YAML's
# algorithm.max_num_gen_batches (10), which cuts the tail of a geometric count of rounds.
UNLIMITED = 0


def test_binomial_values_by_hand():
    np.testing.assert_allclose(binomial_pmf(4, 0.25), [81 / 256, 108 / 256, 54 / 256, 12 / 256, 1 / 256])
    np.testing.assert_allclose(binomial_pmf(3, [0.0, 1.0]), [[1, 0, 0, 0], [0, 0, 0, 1]])
    # n=4 band [0.125, 0.75]: k = 1, 2, 3 (3/4 sits on the upper edge and passes).
    assert band_pass_prob([0.5], 4, 0.125, 0.25)[0] == pytest.approx(14 / 16)
    assert band_pass_prob([0.25], 4, 0.125, 0.25)[0] == pytest.approx((108 + 54 + 12) / 256)
    # n=8: k = 1 is exactly p_lower and passes; k = 7 > 0.75 does not.
    assert band_pass_prob([0.5], 8, 0.125, 0.25)[0] == pytest.approx(sum(math.comb(8, k) for k in range(1, 7)) / 256)
    assert nonzero_variance_prob(0.5, 4) == pytest.approx(14 / 16)
    assert nonzero_variance_prob(0.2, 3) == pytest.approx(1 - 0.008 - 0.512)


@pytest.mark.parametrize("n,p_lower,p_upper", [(4, 0.125, 0.25), (8, 0.25, 0.25), (3, 0.0, 0.0), (5, 0.2, 0.4)])
def test_band_probability_matches_classify_pilot(n, p_lower, p_upper):
    """Sum over every outcome vector of P(outcome) x (classify_pilot passes it)."""
    p = 0.37
    total = 0.0
    for outcome in itertools.product([0.0, 1.0], repeat=n):
        verdict = classify_pilot(np.zeros(n, dtype=int), np.array(outcome), p_lower, p_upper, None)
        k = int(sum(outcome))
        total += verdict.passed[0] * p**k * (1 - p) ** (n - k)
    assert band_pass_prob([p], n, p_lower, p_upper)[0] == pytest.approx(total)


@pytest.mark.parametrize("rate", [0.0, 1.0])
def test_no_spread_anywhere(rate):
    p = np.full(50, rate)
    grpo = predict(p, GRPO(8, 16))
    assert (grpo.rounds_per_step, grpo.rollouts_per_step, grpo.informative_groups_per_step) == (1, 128, 0)
    assert grpo.rollouts_per_informative_group == math.inf
    # Unlimited rounds: never fills.
    assert predict(p, DAPO(8, 32, 16, max_num_gen_batches=UNLIMITED)).rounds_per_step == math.inf
    assert predict(p, PilotCommit(4, 4, 32, 16, max_num_gen_batches=UNLIMITED)).rounds_per_step == math.inf
    # A round limit cuts every step there, with nothing trained.
    for result in (predict(p, DAPO(8, 32, 16, max_num_gen_batches=5)), simulate(p, DAPO(8, 32, 16, 5), steps=5)):
        assert (result.rounds_per_step, result.rollouts_per_step, result.trained_groups_per_step) == (5, 5 * 256, 0)
    for result in (
        predict(p, PilotCommit(4, 4, 32, 16, max_num_gen_batches=5)),
        simulate(p, PilotCommit(4, 4, 32, 16, max_num_gen_batches=5), steps=5),
    ):
        assert (result.rounds_per_step, result.pilot_rollouts_per_step, result.commit_rollouts_per_step) == (5, 640, 0)
        assert result.trained_groups_per_step == 0 and result.filter_pass_rate == 0


def test_half_pass_rate_exact_numbers():
    p = np.full(40, 0.5)
    grpo = predict(p, GRPO(4, 8))
    assert grpo.informative_groups_per_step == pytest.approx(7)  # 8 x 14/16
    assert grpo.rollouts_per_informative_group == pytest.approx(32 / 7)
    # DAPO n=2, G=4, B=2: a group is kept w.p. 1/2, E[rounds] = sum_r P(Bin(4r, 1/2) < 2) = 1 + 1/15 + 64/225.
    dapo = predict(p, DAPO(2, 4, 2, UNLIMITED))
    assert dapo.rounds_per_step == pytest.approx(304 / 225)
    assert dapo.rollouts_per_step == pytest.approx(304 / 225 * 8)
    # PC 2+6, G=1, B=1: a pilot passes w.p. 1/2 and the buffer holds at most one prompt at a step start
    # (b' = the last round's pilot). b=1: one round; b=0: 1 + Geometric(1/2) rounds. So E[rounds] = 2.
    for s in (0, 4):
        pc = predict(p, PilotCommit(2, 6, 1, 1, buffer_max_off_steps=s, max_num_gen_batches=UNLIMITED))
        assert pc.rounds_per_step == pytest.approx(2)
        assert pc.pilot_rollouts_per_step == pytest.approx(4)
        assert pc.commit_rollouts_per_step == pytest.approx(6)
    sim = simulate(p, PilotCommit(2, 6, 1, 1, max_num_gen_batches=UNLIMITED), steps=4000, seed=3)
    assert sim.rounds_per_step == pytest.approx(2, rel=0.05)


@pytest.mark.parametrize(
    "config",
    [
        DAPO(8, 64, 32),
        DAPO(4, 16, 8, max_num_gen_batches=2),
        DAPO(4, 64, 32, downsample_n=8),
        PilotCommit(4, 12, 96, 32),
        PilotCommit(16, 48, 36, 12),
        PilotCommit(8, 8, 96, 32, screen_n=2, downsample_n=16),
    ],
    ids=lambda c: c.label,
)
def test_prediction_at_a_filter_rate_is_the_prediction_whose_pass_rates_give_that_rate(config):
    """Rounds and rollouts depend on the pass rates only through the filter pass rate (and, with screening, the
    share of screens that disagree); so the prediction at the rates a pass-rate table implies must be that
    table's prediction, field by field."""
    p = np.random.default_rng(2).beta(0.3, 3.0, size=500)  # supply below demand: rounds move with the rate
    from_rates = predict(p, config)
    screen = getattr(config, "screen_n", None)
    mixed = None if screen is None else float(screened_pilot_probs(p, config.n_pilot, screen, 0.125, 0.25)[0].mean())
    at_rate = predict_at_filter_rate(from_rates.filter_pass_rate, config, screen_mixed=mixed)
    assert dataclasses.asdict(at_rate) == pytest.approx(dataclasses.asdict(from_rates))
    # The rate is used as given: the other side of 1/2 gives other numbers, and more passes never more rounds.
    low, high = sorted([from_rates.filter_pass_rate, 1 - from_rates.filter_pass_rate])
    assert high - low > 0.05
    rounds = [predict_at_filter_rate(r, config, screen_mixed=mixed).rounds_per_step for r in (high, low)]
    assert rounds[0] < rounds[1]


def test_screening_and_down_sampling_exact_numbers():
    # n = 4, screen 2, p = 1/2: the screen disagrees (1 of 2) w.p. 1/2, and then 1 + k of 4 (k = 0..2) is always
    # in the band [0.125, 0.75]. Without the screen 1..3 of 4 pass: 14/16; the screen loses the 6/16 whose
    # first two agree but whose whole pilot would have passed.
    mixed, passed = screened_pilot_probs(np.array([0.5]), 4, 2, 0.125, 0.25)
    assert (mixed[0], passed[0]) == pytest.approx((0.5, 0.5))
    assert band_pass_prob(np.array([0.5]), 4, 0.125, 0.25)[0] == pytest.approx(14 / 16)
    # n = 8, screen 2: after 1 of 2, the pilot passes unless the other 6 all succeed (7 of 8 > 0.75):
    # mixed = 2p(1 - p), passed = 2p(1 - p)(1 - p^6); at p = 1/4: 3/8 and 3/8 * (1 - 4^-6).
    mixed, passed = screened_pilot_probs(np.array([0.25]), 8, 2, 0.125, 0.25)
    assert (mixed[0], passed[0]) == pytest.approx((3 / 8, 3 / 8 * (1 - 0.25**6)))
    # B = G = 1 with a pass probability of 1/2 takes 2 rounds a step (test_half_pass_rate_exact_numbers); a round
    # pilots one new prompt with 2 rollouts and completes last round's disagreeing screen (1/2) with 2 more.
    p = np.full(40, 0.5)
    pc = predict(p, PilotCommit(4, 12, 1, 1, max_num_gen_batches=UNLIMITED, screen_n=2))
    assert pc.rounds_per_step == pytest.approx(2)
    assert pc.pilot_rollouts_per_step == pytest.approx(2 * (2 + 0.5 * 2))
    assert pc.commit_rollouts_per_step == pytest.approx(12)
    assert predict(
        p, PilotCommit(4, 12, 1, 1, max_num_gen_batches=UNLIMITED, downsample_n=20)
    ).commit_rollouts_per_step == pytest.approx(20)
    # PODS for GRPO: 8 generated, 4 trained; a group has spread iff the 8 had: 1 - 2/2^8.
    grpo = predict(p, GRPO(4, 8, downsample_n=8))
    assert grpo.rollouts_per_step == 64 and grpo.informative_groups_per_step == pytest.approx(8 * (1 - 2 / 256))
    # A trained group of one never varies, however many were generated for it.
    assert predict(p, GRPO(1, 8, downsample_n=4)).informative_groups_per_step == 0
    assert simulate(p, GRPO(1, 8, downsample_n=4), steps=20).informative_groups_per_step == 0
    with pytest.raises(ValueError, match="screen_mixed"):
        predict_at_filter_rate(0.5, PilotCommit(4, 12, 1, 1, screen_n=2))
    with pytest.raises(ValueError, match="screen_mixed"):
        predict_at_filter_rate(0.5, PilotCommit(4, 12, 1, 1), screen_mixed=0.5)
    with pytest.raises(PCConfigError, match="screen_n"):
        predict(p, PilotCommit(4, 12, 1, 1, screen_n=4))
    with pytest.raises(PCConfigError, match="downsample.n"):
        predict(p, GRPO(8, 8, downsample_n=4))


def test_prediction_at_a_filter_rate_exact_numbers_and_errors():
    # As in test_half_pass_rate_exact_numbers: PC 2+6, G=1, B=1 at pass probability 1/2 takes 2 rounds a step;
    # DAPO n=2, G=4, B=2 keeping half its groups takes 304/225.
    assert predict_at_filter_rate(
        0.5, PilotCommit(2, 6, 1, 1, max_num_gen_batches=UNLIMITED)
    ).rounds_per_step == pytest.approx(2)
    assert predict_at_filter_rate(0.5, DAPO(2, 4, 2, UNLIMITED)).rounds_per_step == pytest.approx(304 / 225)
    with pytest.raises(TypeError, match="filters nothing"):
        predict_at_filter_rate(0.5, GRPO(4, 8))
    with pytest.raises(ValueError, match="filter pass rate 1.5"):
        predict_at_filter_rate(1.5, PilotCommit(2, 6, 1, 1))
    with pytest.raises(PCConfigError):
        predict_at_filter_rate(0.5, PilotCommit(4, 12, 96, 32, p_lower=0.9, p_upper=0.5))


@pytest.mark.parametrize(
    "rates,config,key",
    [
        ([0.5], PilotCommit(0, 12, 96, 32), "algorithm.exploration.n"),
        ([0.5], PilotCommit(4, 12, 96, 32, p_lower=0.6, p_upper=0.5), "diversity_threshold_lower"),
        ([0.5], PilotCommit(4, 12, 96, 32, buffer_max_off_steps=-1), "buffer_max_off_steps"),
        ([0.5], GRPO(0, 32), "actor_rollout_ref.rollout.n"),
        ([0.5], DAPO(8, 8, 32, max_num_gen_batches=2), "max_num_gen_batches"),
        ([0.5], DAPO(8, 0, 32), "data.gen_batch_size"),
        ([0.2, 0.4, 1.5], GRPO(4, 8), r"pass_rates\[2\]"),
        ([0.2, float("nan")], GRPO(4, 8), r"pass_rates\[1\]"),
    ],
)
def test_bad_input_names_the_key(rates, config, key):
    with pytest.raises(ValueError, match=key):
        predict(rates, config)


def test_bad_config_is_the_trainer_error():
    with pytest.raises(PCConfigError):
        simulate([0.5], PilotCommit(4, 12, 96, 32, p_lower=0.9, p_upper=0.5))


def test_configuration_defaults_are_the_trainer_yamls():
    from recipe.pc.settings import yaml_defaults

    algorithm = yaml_defaults().algorithm
    pc, dapo = PilotCommit(4, 12, 96, 32), DAPO(16, 96, 32)
    assert (pc.p_lower, pc.p_upper) == (algorithm.diversity_threshold_lower, algorithm.diversity_threshold_upper)
    assert pc.buffer_max_off_steps == algorithm.buffer_max_off_steps
    assert pc.max_num_gen_batches == algorithm.max_num_gen_batches  # was unlimited, against the YAML's 10
    assert dapo.max_num_gen_batches == algorithm.max_num_gen_batches  # every allocator's key
