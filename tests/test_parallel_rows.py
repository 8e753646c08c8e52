"""Row arithmetic over data-parallel ranks: micro-batch sizes checked at start-up, and the real fit() at dp 8.

verl 0.9.1's engine (``prepare_micro_batches``) asserts that each rank's rows split into whole micro-batches
when dynamic batch sizes are off; the tests run that very function on every rank's rows of every actor call.
"""

import dataclasses
from collections import Counter

import pytest
import torch
import yaml
from conftest import compose_pc_config
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from pc_standins import env_file_logger, step_records
from test_train_scripts import run_script
from test_trainer_fit import build_trainer
from verl.utils import tensordict_utils as tu
from verl.workers.engine.utils import prepare_micro_batches

import recipe.pc.generation as generation_module
from recipe.pc.main_pc import _check_pc, preflight
from recipe.pc.parallel import MicroBatch, MicroBatches, check_parallel_sizes, micro_batches, trainable_unit
from recipe.pc.settings import PCConfigError, PCSettings

ARR = "actor_rollout_ref"
LOG_PROB = f"{ARR}.rollout.log_prob_micro_batch_size_per_gpu"
UPDATE = f"{ARR}.actor.ppo_micro_batch_size_per_gpu"
REF = f"{ARR}.ref.log_prob_micro_batch_size_per_gpu"


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
    data.touch()
    files = [f"data.train_files={data}", f"data.val_files={data}", f"{ARR}.model.path={tmp_path}"]
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


@hypothesis_settings(max_examples=400)
@given(
    batch=st.integers(1, 32),
    n_pilot=st.integers(1, 6),
    n_commit=st.integers(1, 6),
    mini=st.sampled_from([1, 2, 3, 4, 8]),
    dp=st.sampled_from([1, 2, 4, 8]),
    ref_dp=st.sampled_from([1, 2, 4, 8]),
    # Mostly powers of two, so that most drawn configurations are accepted and their batches checked.
    sizes=st.tuples(*[st.sampled_from([1, 2, 3, 4, 8, 16])] * 3),
    partial=st.booleans(),
)
def test_every_batch_an_accepted_config_can_train_splits_under_verl(
    batch, n_pilot, n_commit, mini, dp, ref_dp, sizes, partial
):
    """Full and unfilled batches (cut to multiples of trainable_unit) pass verl's own micro-batch split."""
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


# ---------------------------------------------------------------------- launch scripts (DRY_RUN)
def test_smoke_script_at_dp4_is_refused_naming_the_log_prob_micro_size(tmp_path):
    env = {"DRY_RUN": "1", "OUT_DIR": str(tmp_path), "MODEL_PATH": str(tmp_path)}
    out = run_script("smoke_1gpu.sh", env, "trainer.n_gpus_per_node=4")
    assert out.returncode != 0
    assert f"config error: {LOG_PROB}=32 does not divide data.train_batch_size * group size" in out.stderr
    sizes = [f"{key}=4" for key in (UPDATE, LOG_PROB, REF)]
    out = run_script("smoke_1gpu.sh", env, "trainer.n_gpus_per_node=4", *sizes)
    assert out.returncode == 0, out.stderr[-3000:]
    out = run_script("smoke_1gpu.sh", env)  # the one-GPU default (micro 32) divides its 32-row mini-batches
    assert out.returncode == 0, out.stderr[-3000:]


def test_14b_paper_script_validates_on_8_nodes_with_rollout_tp2(tmp_path):
    # The reference preset (the paper scripts' default) reads the as-authors copies of the data.
    (tmp_path / "polaris_53k_as_authors").mkdir()
    (tmp_path / "polaris_53k_as_authors" / "train.parquet").touch()
    (tmp_path / "math_test_as_authors").mkdir()
    for name in ("aime-2024", "aime-2025", "amc-2023", "math-500", "minerva-math", "oylmpiad-bench"):
        (tmp_path / "math_test_as_authors" / f"{name}-nosystem-boxed.parquet").touch()
    (tmp_path / "deepmath_103k_prefiltered_as_authors").mkdir()
    (tmp_path / "deepmath_103k_prefiltered_as_authors" / "test.parquet").touch()
    out = run_script("pc_qwen3-14b_p16c48.sh", {"DRY_RUN": "1", "DATA_DIR": str(tmp_path), "MODEL_PATH": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-3000:]
    cfg = yaml.safe_load(out.stdout)
    assert (cfg["trainer"]["nnodes"], cfg["trainer"]["n_gpus_per_node"]) == (8, 8)
    assert cfg[ARR]["rollout"]["tensor_model_parallel_size"] == 2
    # Dynamic batch sizes are on (train_scripts/common.sh): no micro size is split by count at any dp size.
    assert cfg[ARR]["actor"]["use_dynamic_bsz"] is True


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
        assert record["rollout_stats/num_rollouts_padding"] == expected
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
    assert all(r["training/ppo_mini_batches"] == rows // mini_rows for r in steps)
    assert all(r["training/optimizer_steps"] == rows // mini_rows for r in steps)


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
    assert [r["training/num_prompt_in_batch"] for r in step_records(log)] == [r // 8 for r in trained]
