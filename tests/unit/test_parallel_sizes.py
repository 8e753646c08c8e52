"""Row arithmetic over data-parallel ranks, checked at start-up: micro-batch sizes against each rank's rows.

verl 0.9.1's engine (``prepare_micro_batches``) asserts that each rank's rows split into whole micro-batches
when dynamic batch sizes are off; the tests run that very function on the rows every accepted configuration trains.
"""

import dataclasses
import math

import pytest
import torch
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from support import stand_in_model, write_parquet_rows
from verl.utils import tensordict_utils as tu
from verl.workers.engine.utils import prepare_micro_batches

from recipe.pc.parallel import MicroBatch, MicroBatches, check_parallel_sizes, micro_batches, trainable_unit
from recipe.pc.settings import PCConfigError, PCSettings
from recipe.pc.startup_checks import _check_pc, preflight
from recipe.pc.testing import LOG_PROB, REF, UPDATE, compose_pc_config

ARR = "actor_rollout_ref"


def verl_splits(rows: int, micro: int) -> bool:
    """Whether verl's own prepare_micro_batches accepts ``rows`` rows of one rank at ``micro`` per micro-batch."""
    data = tu.get_tensordict({"x": torch.zeros(rows)}, non_tensor_dict={})
    tu.assign_non_tensor(data, use_dynamic_bsz=False, micro_batch_size_per_gpu=micro)
    try:
        prepare_micro_batches(data)
    except AssertionError:
        return False
    return True


# ---------------------------------------------------------------------- the start-up check
def smoke_config(*extra):
    """The smoke run's shape: 8 prompts x (4 pilots + 4 commits) = 64 rows, mini-batches of 8 x 4 = 32 rows
    (verl's rule, ppo_mini_batch_size x rollout.n, whose arithmetic these checks spell out)."""
    return compose_pc_config(
        [
            "algorithm.mini_batch_unit=rollout_n",
            "data.train_batch_size=8",
            "data.gen_batch_size=16",
            "algorithm.exploration.n=4",
            f"{ARR}.rollout.n=4",
            f"{ARR}.actor.ppo_mini_batch_size=8",
            f"{UPDATE}=4",
            f"{LOG_PROB}=4",
            f"{REF}=4",
            *extra,
        ]
    )


def check(cfg, dp, ref_dp=None):
    settings = PCSettings.from_config(cfg)
    check_parallel_sizes(
        settings, dp, int(cfg.actor_rollout_ref.actor.ppo_mini_batch_size), micro_batches(cfg, dp, ref_dp)
    )


def test_log_prob_micro_size_must_divide_each_ranks_rows_of_a_step():
    with pytest.raises(PCConfigError) as err:
        check(smoke_config(f"{LOG_PROB}=64"), dp=4)
    assert str(err.value) == (
        f"{LOG_PROB}=64 does not divide data.train_batch_size * group size = 8 * 8 = 64 rows a step / 4 ranks = "
        "16 rows per rank: verl asserts each rank's rows split into whole micro-batches when dynamic batch sizes "
        f"are off; set {LOG_PROB}=16 (a divisor of 16) or turn dynamic batch sizes on"
    )
    assert not verl_splits(16, 64) and verl_splits(16, 16)
    check(smoke_config(f"{LOG_PROB}=16"), dp=4)


def test_update_micro_size_must_divide_each_ranks_rows_of_a_mini_batch():
    # One GPU: the whole step (64 rows) splits, but a mini-batch of 32 rows does not split into 64-row micro-batches.
    with pytest.raises(PCConfigError) as err:
        check(smoke_config(f"{UPDATE}=64"), dp=1)
    assert str(err.value) == (
        f"{UPDATE}=64 does not divide PPO mini-batches of actor_rollout_ref.actor.ppo_mini_batch_size * 4 = 8 * 4 = "
        "32 rows / 1 ranks = 32 rows per rank: verl asserts each rank's rows split into whole micro-batches when "
        f"dynamic batch sizes are off; set {UPDATE}=32 (a divisor of 32) or turn dynamic batch sizes on"
    )
    with pytest.raises(PCConfigError, match=f"{UPDATE}=6 does not divide .* = 8 rows per rank: .* set {UPDATE}=4 "):
        check(smoke_config(f"{UPDATE}=6"), dp=4)


def test_mini_batches_must_divide_the_step_and_the_fix_names_only_other_settings():
    # 64 rows a step; 6 x 4 = 24-row mini-batches (rollout.n unit) or 3 x 8 = 24 (whole groups) leave a remainder.
    with pytest.raises(PCConfigError) as err:
        check(smoke_config(f"{ARR}.actor.ppo_mini_batch_size=6", f"{UPDATE}=8"), dp=1)
    assert "6 * 4 = 24 rows (algorithm.mini_batch_unit=rollout_n)" in str(err.value)
    assert "set algorithm.mini_batch_unit=group, or set algorithm.partial_mini_batch=true" in str(err.value)
    group = ("algorithm.mini_batch_unit=group", f"{ARR}.actor.ppo_mini_batch_size=3", f"{UPDATE}=8")
    with pytest.raises(PCConfigError) as err:
        check(smoke_config(*group), dp=1)
    assert "3 * 8 = 24 rows (algorithm.mini_batch_unit=group)" in str(err.value)
    assert "mini_batch_unit=group," not in str(err.value) and "set algorithm.partial_mini_batch=true" in str(err.value)


def test_groups_of_different_sizes_split_by_rows_and_the_refusal_says_so():
    # The knapsack's groups: 4 pilots + 4 to 16 commits, 8 rows on average, so 64 rows a full step whatever the sizes.
    knapsack = ("algorithm.rollout_allocation=knapsack", "algorithm.knapsack.max_commit=16")
    knapsack += ("algorithm.min_train_prompts=8", "algorithm.mini_batch_unit=group", f"{UPDATE}=8")
    # Mini-batches of 2 x 8 = 16 rows: four updates, though a group of 20 rows fits no mini-batch whole.
    check(smoke_config(*knapsack, f"{ARR}.actor.ppo_mini_batch_size=2"), dp=1)
    with pytest.raises(PCConfigError) as err:
        check(smoke_config(*knapsack, f"{ARR}.actor.ppo_mini_batch_size=3"), dp=1)
    message = str(err.value)
    assert "24 rows (algorithm.mini_batch_unit=group), which must divide the 64 trained rows (groups of 8 " in message
    assert "to 20 rows, 8 on average: mini-batches are counted in rows and may split a group) per step" in message


def test_partial_mini_batch_is_padded_to_a_whole_one_before_the_update_split():
    # Reference preset shape: 8 x (2 + 6) = 64 rows, mini-batches of 2 x 6 = 12 rows: 5 whole + a partial one
    # per rank at dp 1, padded to 12 rows; the update micro size must divide 12, the log-prob one 64.
    base = ("algorithm.partial_mini_batch=true", "algorithm.exploration.n=2", f"{ARR}.rollout.n=6")
    base += (f"{ARR}.actor.policy_loss.loss_mode=pc_reference",)
    check(smoke_config(*base, f"{ARR}.actor.ppo_mini_batch_size=2", f"{UPDATE}=12", f"{LOG_PROB}=64"), dp=1)
    with pytest.raises(PCConfigError, match=f"{UPDATE}=8 does not divide .* = 12 rows per rank"):
        check(smoke_config(*base, f"{ARR}.actor.ppo_mini_batch_size=2", f"{UPDATE}=8"), dp=1)


def test_reference_micro_size_is_checked_only_with_a_separate_reference_model():
    cfg = smoke_config(f"{REF}=32")
    check(cfg, dp=4, ref_dp=None)  # no reference model: the ref key is not used
    with pytest.raises(PCConfigError, match=f"^{REF}=32 does not divide .* = 16 rows per rank: .* set {REF}=16 "):
        check(cfg, dp=4, ref_dp=4)
    # A reference sharded differently (ref ulysses size): its own ranks count.
    check(smoke_config(f"{REF}=32"), dp=4, ref_dp=2)


def test_dynamic_batch_sizes_bypass_the_micro_sizes_and_must_agree():
    dynamic = (f"{ARR}.actor.use_dynamic_bsz=true", f"{UPDATE}=64", f"{LOG_PROB}=64", f"{REF}=64")
    assert micro_batches(smoke_config(*dynamic), 4, 4) == MicroBatches()
    check(smoke_config(*dynamic), dp=4, ref_dp=4)
    with pytest.raises(PCConfigError) as err:
        micro_batches(smoke_config(f"{ARR}.rollout.log_prob_use_dynamic_bsz=true"), 4, None)
    assert str(err.value) == (
        f"{ARR}.actor.use_dynamic_bsz=False and {ARR}.rollout.log_prob_use_dynamic_bsz=True must agree: verl's "
        "actor worker runs both with one engine setting"
    )


def test_validate_path_checks_the_reference_rows_and_leaves_null_sizes_to_verl(tmp_path):
    # With a reference model the validate path checks the reference's rows too (8 GPUs by default: 8 rows each).
    with pytest.raises(PCConfigError, match=f"^{REF}=48 does not divide .* / 8 ranks = 8 rows per rank"):
        _check_pc(smoke_config(f"{REF}=48", f"{ARR}.actor.use_kl_loss=true"))
    _check_pc(smoke_config(f"{REF}=48"))  # no reference model: its size is not used
    # A null size is named once, by verl's own check, not broken on by ours.
    data = tmp_path / "d.parquet"
    write_parquet_rows(data)
    files = [f"data.train_files={data}", f"data.val_files={data}", f"{ARR}.model.path={stand_in_model(tmp_path / 'm')}"]
    for key, extra in ((UPDATE, []), (LOG_PROB, []), (REF, [f"{ARR}.actor.use_kl_loss=true"])):
        problems, _ = preflight(smoke_config(f"{key}=null", *extra, *files), fetch_model=False)
        assert len(problems) == 1 and key.rsplit(".", 1)[1].removesuffix("_per_gpu") in problems[0], problems


BASE_SETTINGS = PCSettings.from_config(compose_pc_config([]))


def test_trainable_unit_accounts_for_the_log_prob_micro_size():
    settings = PCSettings.from_config(smoke_config())
    # 4 prompts = 32 rows fill one mini-batch of 32; a log-prob micro size of 64 at dp 1 needs 8 prompts.
    assert trainable_unit(settings, 1, 8) == 4
    assert trainable_unit(settings, 1, 8, MicroBatches((MicroBatch(LOG_PROB, 64, 1),))) == 8
    assert trainable_unit(settings, 1, 8, MicroBatches((MicroBatch(LOG_PROB, None, 1),))) == 4
    # A reference model on 2 ranks with micro 32 needs 64 rows too.
    assert trainable_unit(settings, 1, 8, MicroBatches((MicroBatch(REF, 32, 2),))) == 8


@st.composite
def parallel_layouts(draw) -> tuple[int, int, int, int]:
    """(prompts a step, mini-batch size, dp, reference dp). Most batches are whole multiples of the mini-batch and the
    larger rank count, which the checks accept more often (a quarter of draws accepted, not a tenth), so more accepted
    configurations get their batches checked; the rest are any size from 1 to 32."""
    mini, dp, ref_dp = draw(st.sampled_from([1, 2, 3, 4, 8])), *draw(st.tuples(*[st.sampled_from([1, 2, 4, 8])] * 2))
    ranks = max(dp, ref_dp)
    aligned = st.integers(1, 4).map(lambda k: k * mini * ranks // math.gcd(mini, ranks))
    return draw(st.one_of(aligned, aligned, st.integers(1, 32))), mini, dp, ref_dp


@hypothesis_settings(max_examples=400)
@given(
    layout=parallel_layouts(),
    n_pilot=st.integers(1, 6),
    n_commit=st.integers(1, 6),
    # Mostly powers of two, so that most drawn configurations are accepted and their batches checked.
    sizes=st.tuples(*[st.sampled_from([1, 2, 3, 4, 8, 16])] * 3),
    partial=st.booleans(),
)
def test_every_batch_an_accepted_config_can_train_splits_under_verl(layout, n_pilot, n_commit, sizes, partial):
    """Full and unfilled batches (cut to multiples of trainable_unit) pass verl's own micro-batch split."""
    batch, mini, dp, ref_dp = layout
    log_prob, ref, update = sizes
    settings = dataclasses.replace(
        BASE_SETTINGS,
        train_batch_size=batch,
        gen_batch_size=batch,
        n_commit=n_commit,
        buffer=dataclasses.replace(BASE_SETTINGS.buffer, size=batch),
        pilot=dataclasses.replace(BASE_SETTINGS.pilot, n=n_pilot, n_effective=n_pilot),
        reference=dataclasses.replace(BASE_SETTINGS.reference, partial_mini_batch=partial),
    )
    micro = MicroBatches(
        (MicroBatch(LOG_PROB, log_prob, dp), MicroBatch(REF, ref, ref_dp)), MicroBatch(UPDATE, update, dp)
    )
    try:
        check_parallel_sizes(settings, dp, mini, micro)
    except PCConfigError:
        return
    unit = trainable_unit(settings, dp, mini, micro)
    assert batch % unit == 0
    mini_rows = mini * settings.mini_batch_multiplier
    assert verl_splits(mini_rows // dp, update)
    for prompts in range(unit, batch + 1, unit):
        rows = prompts * settings.group_size
        assert rows % dp == 0 and verl_splits(rows // dp, log_prob)
        assert rows % ref_dp == 0 and verl_splits(rows // ref_dp, ref)
        assert partial or (rows // dp) % (mini_rows // dp) == 0
