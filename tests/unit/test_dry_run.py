"""The dry run's summary (``recipe.pc.dry_run.summary``) on composed configs: the counts it promises exact are exact,
the minimum and the estimate follow their stated rule, the schedules count what the trainer does, and it stays short.
Every config here passes the start-up checks, as the dry run's would before its summary."""

import numpy as np
import pytest
from safetensors.numpy import save_file
from support import changed, valid_overrides, write_parquet_rows

from recipe.pc import main_pc
from recipe.pc.dry_run import HEADER, summary, token_id_bytes
from recipe.pc.testing import compose_pc_config

MAX_LINES = 20


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """4 GPUs, 8 prompts a step, 512 train rows, a stand-in model folder (its weights unreadable), console logs;
    composed once, each test changes a copy."""
    root = tmp_path_factory.mktemp("dry_run")
    for name in ("train.parquet", "test.parquet"):
        write_parquet_rows(root / name)
    overrides = valid_overrides(root / "train.parquet", root / "test.parquet", root / "model")
    return compose_pc_config([*overrides, "trainer.logger=[console]", f"trainer.default_local_dir={root}/ckpt"])


def lines_of(config, environ=None, **kwargs) -> dict[str, str]:
    """The summary by label, a label's continuation lines joined to it with " | "."""
    lines = summary(config, environ={} if environ is None else environ, **kwargs)
    assert lines[0].startswith(HEADER) and len(lines) <= MAX_LINES
    entries, label = {}, None
    for line in lines[1:]:
        label = line[2:14].strip() or label  # a continuation line has no label of its own
        entries[label] = f"{entries[label]} | {line[14:]}" if label in entries else line[14:]
    return entries


GRPO = {
    "algorithm__rollout_allocation": "grpo",
    "actor_rollout_ref__rollout__n": 4,
    "trainer__total_training_steps": 10,
}
PC = {
    "data__gen_batch_size": 16,
    "algorithm__exploration__n": 2,
    "actor_rollout_ref__rollout__n": 6,
    "trainer__total_training_steps": 10,
}


def test_grpo_rollouts_are_exact_and_so_are_its_schedules(base):
    schedule = {"trainer__test_freq": 3, "trainer__save_freq": 4, "trainer__max_actor_ckpt_to_keep": 2}
    got = lines_of(changed(base, **GRPO, **schedule))
    assert got["GPUs"] == "1 node × 4 GPUs = 4; actor data parallel 4, rollout tensor parallel 2"
    assert got["allocator"] == "grpo: a group of 4 rollouts (rollout.n) for each prompt, every group trained"
    assert got["prompts"] == "8 trained a step (data.train_batch_size)"
    assert got["steps"] == "10 steps (trainer.total_training_steps); 30 epochs × 512 rows // 8 a round = 1,920 rounds"
    assert got["rollouts"] == "32 a step (8 × 4); in all: 320"
    # Steps 3, 6, 9 and the last, 10, and the one before training.
    assert got["validation"] == "before training; every 3 steps and at the last: 5 validations"
    assert got["checkpoints"].startswith(
        "every 4 steps and at the last: 3; the last 2 kept (trainer.max_actor_ckpt_to_keep); in "
    )
    assert got["logs"] == "console"
    no_before = lines_of(changed(base, **GRPO, **schedule, trainer__val_before_train=False))
    assert no_before["validation"] == "every 3 steps and at the last: 4 validations"


def test_validation_at_rollout_budgets_names_grpos_steps_and_no_others(base):
    budget = {"trainer__val_rollout_interval": 80, "trainer__test_freq": -1, "trainer__val_before_train": False}
    # 32 rollouts a step reach 80, 160, 240 and 320 at steps 3, 5, 8 and 10.
    grpo = lines_of(changed(base, **GRPO, **budget))
    assert grpo["validation"] == "at each 80 generated rollouts (steps 3, 5, 8, 10) and at the last: 4 validations"
    # 12 steps: the budgets fall at steps 3, 5, 8 and 10, and the last step, 12, validates too.
    longer = lines_of(changed(base, **{**GRPO, "trainer__total_training_steps": 12}, **budget))
    assert longer["validation"] == "at each 80 generated rollouts (steps 3, 5, 8, 10) and at the last: 5 validations"
    pc = lines_of(changed(base, **PC, **budget))
    assert pc["validation"] == (
        "at the first step past each 80 generated rollouts (which step depends on the pass rates) and at the last"
    )
    off = lines_of(changed(base, **GRPO, trainer__test_freq=-1, trainer__val_before_train=True))
    assert off["validation"] == (
        "before training; none during training (trainer.test_freq and trainer.val_rollout_interval are off): "
        "1 validation"
    )


def test_pilot_commit_gives_a_minimum_from_the_pilot_size_and_an_estimate_at_its_stated_share(base):
    got = lines_of(changed(base, **PC))
    assert got["allocator"] == (
        "pilot_commit: pilots of 2 (exploration.n) a new prompt, commits of 6 (rollout.n) a buffered prompt; "
        "groups of 2 + 6 = 8"
    )
    assert got["prompts"] == "8 trained a step (data.train_batch_size); 16 new a round (data.gen_batch_size)"
    # A round pilots 16 prompts x 2 and commits 8 x 6: 80. At a 25% band share a step takes 8 / (0.25 x 16) = 2
    # rounds: 2 x 32 + 48 = 112. The run: 10 steps and step 1's pilot-only round, 11 rounds x 32 + 10 x 48 = 832;
    # estimated (10 x 2 + 1) x 32 + 480 = 1,152.
    assert got["rollouts"] == (
        "at least 80 a step (a round of 16 × 2 pilots, 8 × 6 commits)"
        " | estimate 112 a step, if 25% of the pilots land in the band (2.00 rounds a step; PASS_SHARE=0.25)"
        " | in all: at least 832; estimate 1,152"
    )
    half = lines_of(changed(base, **PC), {"PASS_SHARE": "0.5"})  # one round a step: the estimate is the minimum
    assert (
        "estimate 80 a step, if 50% of the pilots land in the band (1.00 rounds a step; PASS_SHARE=0.5)"
        in (half["rollouts"])
    )
    # A screen of 2 of 4 pilot rollouts lowers the minimum (a screen that agrees ends the pilot), not the estimate.
    screened = lines_of(changed(base, **{**PC, "algorithm__exploration__n": 4}, algorithm__exploration__screen_n=2))
    assert screened["rollouts"].startswith("at least 80 a step (a round of 16 × 2 pilots, 8 × 6 commits)")
    assert "estimate 176 a step" in screened["rollouts"] and "screened pilots counted whole" in screened["rollouts"]


DAPO = {"algorithm__rollout_allocation": "dapo", "data__gen_batch_size": 24, "actor_rollout_ref__rollout__n": 4}


def test_dapo_counts_rounds_of_whole_groups_and_its_round_unit_counts_the_run_in_rounds(base):
    got = lines_of(changed(base, **DAPO, trainer__total_training_steps=10))
    assert got["allocator"] == "dapo: groups of 4 (rollout.n), kept when they vary; at most 10 rounds a step"
    # A round: 24 x 4 = 96. At a 25% share a step takes 8 / (0.25 x 24) = 1.33 rounds.
    assert got["rollouts"] == (
        "at least 96 a step (1 × 24 prompts × 4)"
        " | estimate 128 a step, if 25% of the groups vary (1.33 rounds a step; PASS_SHARE=0.25)"
        " | in all: at least 960; estimate 1,280"
    )
    rounds = changed(base, **DAPO, trainer__total_training_steps=10, algorithm__dapo_step_unit="round")
    got = lines_of(changed(rounds, trainer__test_freq=5, trainer__save_freq=5))
    assert got["steps"].startswith("10 rounds (trainer.total_training_steps)")
    assert got["rollouts"].endswith("in all: at least 960: 10 rounds × 24 × 4")
    # The optimizer steps are not known: neither validations nor checkpoints are counted.
    assert got["validation"] == "before training; every 5 steps and at the last"
    assert got["checkpoints"].startswith("every 5 steps and at the last; all kept; in ")


def test_knapsack_shows_its_commit_sizes(base):
    knapsack = {"algorithm__rollout_allocation": "knapsack", "algorithm__min_train_prompts": 8}
    got = lines_of(changed(base, **knapsack, data__gen_batch_size=16, trainer__total_training_steps=10))
    assert got["allocator"] == (
        "knapsack: pilots of 8 (exploration.n) a new prompt; commits of 4 to 32 in steps of 4 (algorithm.knapsack.*), "
        "8 (rollout.n) on average; groups of 12 to 40"
    )
    assert got["rollouts"].startswith("at least 192 a step (a round of 16 × 8 pilots, 8 × 8 commits)")


def test_steps_come_from_the_data_when_the_config_does_not_set_them_or_the_data_ends_first(base, tmp_path):
    def from_epochs(**values):
        config = changed(base, **values, trainer__total_epochs=3)
        config.trainer.total_training_steps = None
        return config

    grpo = lines_of(from_epochs(**GRPO))
    assert grpo["steps"] == (
        "192 steps: trainer.total_training_steps is null (3 epochs × 512 rows // 8 a round = 192 rounds)"
    )
    assert grpo["rollouts"] == "32 a step (8 × 4); in all: 6,144"
    pc = lines_of(from_epochs(**PC))  # a PC step may take several rounds, and the first round commits nothing
    assert pc["steps"].startswith("at most 95 steps: trainer.total_training_steps is null (3 epochs × 512 rows // 16")
    assert pc["rollouts"].endswith(", if all 95 steps run")
    # Set steps: exact where the data holds the estimate's rounds (2 a step at 25% in the band, plus the first).
    held = "3 epochs × 512 rows // 16 a round = 96 rounds"
    for steps, line in (
        (40, f"40 steps (trainer.total_training_steps); {held}"),
        (
            50,
            f"at most 50 steps (trainer.total_training_steps); {held}; the estimate needs 101: the data may end first",
        ),
        (100, f"at most 95 steps: the data ends first ({held})"),
    ):
        assert (
            lines_of(changed(base, **{**PC, "trainer__total_training_steps": steps}, trainer__total_epochs=3))["steps"]
            == line
        )
    short = lines_of(changed(base, **GRPO, trainer__total_epochs=1, data__train_max_samples=40))
    assert short["steps"] == "5 steps: the data ends first (1 epoch × 40 rows // 8 a round = 5 rounds)"
    (tmp_path / "unreadable.parquet").write_bytes(b"")  # no footer to read
    unread = lines_of(from_epochs(**GRPO, data__train_files=str(tmp_path / "unreadable.parquet")))
    assert unread["steps"] == "unknown: trainer.total_training_steps is null and the train rows cannot be read here"
    assert unread["rollouts"] == "32 a step (8 × 4); in all: unknown steps"


def write_model(folder, shapes) -> str:
    """A model folder whose weights are safetensors shards of these shapes (int8: the dtype is not counted)."""
    folder.mkdir()
    for shard, shape in enumerate(shapes):
        save_file({f"w{shard}": np.zeros(shape, dtype=np.int8)}, str(folder / f"model-{shard}.safetensors"))
    return str(folder)


def test_disk_counts_the_parameters_and_the_bytes_an_actor_checkpoint_holds(base, tmp_path):
    model = write_model(tmp_path / "weights", [(1200, 1000), (34,)])  # 1,200,034 parameters
    saving = changed(base, **GRPO, actor_rollout_ref__model__path=model, trainer__save_freq=4)
    # fp32 weights and AdamW's two fp32 moments: 12 bytes; 3 checkpoints (steps 4, 8, 10), all kept.
    assert lines_of(saving)["disk"] == (
        "14.4 MB a checkpoint (1,200,034 parameters × 12 bytes: fp32 weights, AdamW's 2 moments); "
        "43.2 MB for the 3 checkpoints on disk at once"
    )
    keep_one = lines_of(changed(saving, trainer__max_actor_ckpt_to_keep=1))
    assert keep_one["disk"].endswith("28.8 MB for the 2 checkpoints on disk at once")  # the old one until the new is in
    # The Hugging Face copy is the state dict as trained (verl does not cast it), in the weights' dtype.
    hf = {"actor_rollout_ref__actor__checkpoint__save_contents": ["model", "optimizer", "extra", "hf_model"]}
    assert lines_of(changed(saving, **hf))["disk"].startswith(
        "19.2 MB a checkpoint (1,200,034 parameters × 16 bytes: fp32 weights, AdamW's 2 moments, a fp32 Hugging Face "
        "copy)"
    )
    bf16 = changed(saving, **hf, actor_rollout_ref__actor__fsdp_config__model_dtype="bf16")
    assert lines_of(bf16)["disk"].startswith("9.6 MB a checkpoint (1,200,034 parameters × 8 bytes: bf16 weights")
    hub = lines_of(changed(saving, actor_rollout_ref__model__path="Org/Model"))
    assert hub["disk"] == "model size unknown: Org/Model is not a local folder: a hub id is not read in a dry run"
    no_saves = lines_of(changed(saving, trainer__save_freq=-1))
    assert no_saves["checkpoints"] == "none (trainer.save_freq=-1): a stopped run cannot resume"
    assert "disk" not in no_saves


def test_a_pilot_allocators_buffer_is_counted_per_checkpoint_at_the_estimate(base, tmp_path):
    saving = changed(base, **PC, trainer__save_freq=5)
    # At 25% a step takes 2 rounds of 16: 8 prompts a step land in the band, kept 4 + 1 steps: 40. A prompt: 512
    # prompt ids once, and 2 pilots × (512 response ids + 1,024 mask bytes + 512 float32 log-probs + 8 reward bytes);
    # ids take int32's 4 bytes when the vocabulary is not read: 2,048 + 2 × 5,128 = 12,304.
    assert lines_of(saving)["buffer"] == (
        "up to 492.2 kB a checkpoint: 40 pilot groups (8 a step land in the band × 5 steps kept, none committed) × "
        "12.3 kB (2 pilots × (512 + 512) tokens: ids, masks, log-probs; per-row text not counted)"
    )
    # A share whose inflow is not whole: 10.56 a step × 5 steps is 52.8, counted up to 53 groups (652,112 bytes).
    fractional = lines_of(saving, {"PASS_SHARE": "0.66"})["buffer"]
    assert fractional.startswith("up to 652.1 kB a checkpoint: 53 pilot groups (10.6 a step land in the band × 5")
    small = lines_of(changed(saving, algorithm__buffer_size=10))["buffer"]
    assert small.startswith("up to 123.0 kB a checkpoint: 10 pilot groups (algorithm.buffer_size) × 12.3 kB")
    # The knapsack also keeps the last round's 12 pilots outside the band; its pilots are 8 a prompt:
    # 2,048 + 8 × 5,128 = 43,072 a prompt.
    knapsack = {"algorithm__rollout_allocation": "knapsack", "algorithm__min_train_prompts": 8}
    edges = lines_of(changed(base, **knapsack, data__gen_batch_size=16, trainer__save_freq=5))["buffer"]
    assert edges.startswith(
        "up to 2.2 MB a checkpoint: 52 pilot groups (8 a step land in the band × 5 steps kept, none committed; and 12 "
        "of the last round's pilots outside the band) × 43.1 kB (8 pilots"
    )
    for nothing_saved in (
        {**GRPO, "trainer__save_freq": 5},
        {**PC, "trainer__save_freq": -1},
        {**PC, "trainer__save_freq": 0},
    ):
        assert "buffer" not in lines_of(changed(base, **nothing_saved))


@pytest.mark.parametrize(("vocab", "width"), [(256, 1), (32_768, 2), (32_769, 4), (151_936, 4)])
def test_token_ids_are_counted_in_the_narrowest_integer_that_holds_the_vocabulary(base, tmp_path, vocab, width):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(f'{{"vocab_size": {vocab}}}')  # ids 0 .. vocab - 1
    config = changed(
        base,
        **PC,
        trainer__save_freq=5,
        actor_rollout_ref__model__path=str(model),
        actor_rollout_ref__rollout__calculate_log_probs=False,
    )
    each = 512 * width + 2 * (512 * width + 1024 + 8)  # no log-probs
    assert lines_of(config)["buffer"].endswith(
        f"× {each / 1e3:.1f} kB (2 pilots × (512 + 512) tokens: ids, masks; per-row text not counted)"
    )


@pytest.mark.parametrize("text", ['{"model_type": "llama"}', '{"vocab_size": null}', "{"])
def test_a_config_json_without_a_readable_vocabulary_counts_int32_ids(tmp_path, text):
    (tmp_path / "config.json").write_text(text)  # no key (some configs nest it), null, not JSON
    assert token_id_bytes(str(tmp_path)) == 4


def test_logs_name_where_each_backend_writes(base):
    loggers = changed(base, trainer__logger=["console", "file", "tensorboard", "wandb"], trainer__rollout_data_dir="/d")
    environ = {"VERL_FILE_LOGGER_PATH": "/logs/m.jsonl", "TENSORBOARD_DIR": "/tb", "WANDB_MODE": "offline"}
    assert lines_of(loggers, environ)["logs"] == (
        "console; file /logs/m.jsonl; tensorboard /tb; wandb project pilot-commit, run pc, WANDB_MODE=offline; "
        "rollout dumps /d"
    )
    assert lines_of(loggers, {})["logs"] == (  # verl's own paths, W&B online
        "console; file ./pilot-commit/pc.jsonl; tensorboard tensorboard_log/pilot-commit/pc; wandb project "
        "pilot-commit, run pc, WANDB_MODE=online; rollout dumps /d"
    )


def test_the_dry_run_prints_the_summary_once_the_checks_pass_and_the_config_only_when_asked(base, capsys):
    import yaml

    config = changed(base, **GRPO)
    main_pc.dry_run(config)
    out, err = capsys.readouterr()
    assert out.splitlines() == summary(config) and err.endswith("config checks passed\n")
    main_pc.dry_run(config, show_config=True)
    printed_config, printed_summary = capsys.readouterr().out.split(HEADER)
    assert yaml.safe_load(printed_config)["trainer"]["total_training_steps"] == 10
    assert (HEADER + printed_summary).splitlines() == summary(config)
    with pytest.raises(SystemExit) as stopped:  # a failed check: no summary
        main_pc.dry_run(changed(base, algorithm__exploration__n=0))
    assert stopped.value.code == 1 and capsys.readouterr().out == ""


@pytest.mark.parametrize("value", ["0", "1.5", "abc", "-0.2", "nan"])
def test_a_pass_share_outside_0_to_1_stops_the_dry_run_with_one_line(base, capsys, monkeypatch, value):
    """Catches: a share of 0 dividing by zero, a share above 1 read as fewer rounds than one, or text traced back."""
    monkeypatch.setenv("PASS_SHARE", value)
    with pytest.raises(SystemExit) as stopped:
        main_pc.dry_run(changed(base, **PC))
    out, err = capsys.readouterr()
    assert stopped.value.code == 1 and out == ""
    assert err == (
        f"config error: PASS_SHARE={value} must be a share in (0, 1], e.g. 0.3 for 30% of the pilots in the band; "
        "unset it for the default 0.25\n"
    )
