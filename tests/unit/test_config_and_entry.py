"""The Hydra config composes on CPU with every PC key, and bad PC values fail with the key named."""

import re
import sys

import pytest
from omegaconf import OmegaConf
from support import valid_overrides as passing_overrides
from support import write_parquet_rows

from recipe.pc.parallel import check_parallel_sizes
from recipe.pc.settings import PCConfigError, PCSettings
from recipe.pc.startup_checks import preflight
from recipe.pc.testing import compose_pc_config

PC_KEYS = [
    "data.gen_batch_size",
    "data.custom_cls.path",
    "reward.reward_manager.name",
    "reward.reward_kwargs.overlong_buffer_cfg.enable",
    "reward.reward_kwargs.overlong_buffer_cfg.len",
    "reward.reward_kwargs.overlong_buffer_cfg.penalty_factor",
    "reward.reward_kwargs.overlong_buffer_cfg.log",
    "algorithm.agg_metric",
    "algorithm.max_num_gen_batches",
    "algorithm.buffer_size",
    "algorithm.buffer_max_off_steps",
    "algorithm.buffer_sampling_method",
    "algorithm.buffer_response_sampling_method",
    "algorithm.diversity_threshold_upper",
    "algorithm.diversity_threshold_lower",
    "algorithm.exclude_threshold_upper",
    "algorithm.exploration.n",
    "algorithm.exploration.n_effective",
    "algorithm.seed",
    "trainer.project_name",
]


def test_entry_point_prints_composed_config_without_gpu(tmp_path, monkeypatch, capsys):
    """``python -m recipe.pc.main_pc --cfg job``, run in this process: Hydra prints the job's config and returns
    before the task (no GPU, no Ray)."""
    import yaml

    from recipe.pc import main_pc

    monkeypatch.setattr(main_pc, "run_ppo", lambda *args, **kwargs: pytest.fail("run_ppo started"))
    monkeypatch.setattr(sys, "argv", [main_pc.__file__, "--cfg", "job"])
    # As under `python -m`, where main_pc is __main__: Hydra finds config/ beside the file, not as a package.
    monkeypatch.setenv("HYDRA_MAIN_MODULE", "__main__")
    monkeypatch.chdir(tmp_path)  # where a Hydra run would write outputs/
    main_pc.main()
    cfg = yaml.safe_load(capsys.readouterr().out)
    for key in PC_KEYS:
        node = cfg
        for part in key.split("."):
            assert part in node, f"{key} missing from the composed config"
            node = node[part]
    assert cfg["algorithm"]["diversity_threshold_lower"] == 0.125
    assert cfg["algorithm"]["exclude_threshold_upper"] == 1.0
    assert cfg["actor_rollout_ref"]["rollout"]["name"] == "???"  # still stock verl underneath


def test_defaults_read_into_settings():
    settings = PCSettings.from_config(compose_pc_config(["data.train_batch_size=16", "data.seed=3"]))
    assert settings.gen_batch_size == 16 and settings.pilot.n_effective == settings.pilot.n == 8
    assert settings.group_size == 16 and settings.train_rows == 256
    assert settings.seed == 3 and settings.pilot.evict_threshold == 1.0


@pytest.mark.parametrize(
    "override, match",
    [
        ("algorithm.diversity_threshold_lower=1.5", "diversity_threshold_lower"),
        ("algorithm.diversity_threshold_upper=-0.1", "diversity_threshold_upper"),
        ("algorithm.diversity_threshold_lower=0.6", "empty band"),
        ("algorithm.exploration.n_effective=9", "n_effective"),
        ("algorithm.exploration.n=0", "exploration.n"),
        ("algorithm.exclude_threshold_upper=0", "exclude_threshold_upper"),
        ("algorithm.buffer_size=4", "buffer_size"),
        ("algorithm.buffer_max_off_steps=-1", "buffer_max_off_steps"),
        ("algorithm.buffer_sampling_method=oldest", "buffer_sampling_method"),
        ("algorithm.buffer_response_sampling_method=all", "buffer_response_sampling_method"),
        ("algorithm.rollout_allocation=ppo", "rollout_allocation"),
        ("algorithm.mini_batch_unit=tokens", "mini_batch_unit"),
    ],
)
def test_bad_values_name_their_key(override, match):
    cfg = compose_pc_config(["data.train_batch_size=16", "algorithm.diversity_threshold_upper=0.5", override])
    with pytest.raises(PCConfigError, match=match):
        PCSettings.from_config(cfg)


def test_parallel_size_checks():
    settings = PCSettings.from_config(compose_pc_config(["data.train_batch_size=16"]))
    check_parallel_sizes(settings, dp_size=8, ppo_mini_batch_size=4)  # 256 rows, mini 32 rows
    with pytest.raises(PCConfigError, match="data-parallel"):
        check_parallel_sizes(settings, dp_size=3, ppo_mini_batch_size=4)
    with pytest.raises(PCConfigError, match="ppo_mini_batch_size=3"):
        check_parallel_sizes(settings, dp_size=1, ppo_mini_batch_size=3)


@pytest.mark.parametrize(
    "override, key",
    [
        ("algorithm.carry_over_epoch=no", "algorithm.carry_over_epoch"),
        ("algorithm.carry_over_epoch=off", "algorithm.carry_over_epoch"),
        ("algorithm.carry_over_epoch='false'", "algorithm.carry_over_epoch"),
        ("algorithm.carry_over_epoch=0", "algorithm.carry_over_epoch"),
        ("algorithm.raise_on_unfilled_batch=yes", "algorithm.raise_on_unfilled_batch"),
        ("algorithm.exploration.n=2.5", "algorithm.exploration.n"),
        ("algorithm.exploration.n=2.0", "algorithm.exploration.n"),
        ("algorithm.exploration.n=abc", "algorithm.exploration.n"),
        ("algorithm.exploration.n=true", "algorithm.exploration.n"),
        ("algorithm.exploration.n=null", "algorithm.exploration.n"),
        ("algorithm.diversity_threshold_lower=low", "algorithm.diversity_threshold_lower"),
        ("algorithm.buffer_size='1000'", "algorithm.buffer_size"),
        ("data.gen_batch_size=16.5", "data.gen_batch_size"),
        ("algorithm.buffer_sampling_method=3", "algorithm.buffer_sampling_method"),
    ],
)
def test_values_of_the_wrong_type_are_errors_naming_their_key(override, key):
    with pytest.raises(PCConfigError, match=rf"^{re.escape(key)}="):
        PCSettings.from_config(compose_pc_config([override]))


def test_typed_values_parse_strictly():
    settings = PCSettings.from_config(
        compose_pc_config(
            [
                "algorithm.carry_over_epoch=false",
                "algorithm.exclude_threshold_upper=1",
                "algorithm.min_train_prompts=null",
                "algorithm.exploration.n_effective=null",
                "algorithm.exploration.n=6",
            ]
        )
    )
    assert settings.reference.carry_over_epoch is False
    assert settings.pilot.evict_threshold == 1.0 and isinstance(settings.pilot.evict_threshold, float)
    assert settings.min_train_prompts is None and settings.pilot.n_effective == 6
    dapo = PCSettings.from_config(
        compose_pc_config(["algorithm.rollout_allocation=dapo", "algorithm.agg_metric=score"])
    )
    assert dapo.agg_metric == "score"  # one key for every allocator's filter metric


@pytest.mark.parametrize(
    "override, instead",
    [
        ("algorithm.filter_groups.metric=score", "algorithm.agg_metric"),
        ("algorithm.filter_groups.max_num_gen_batches=3", "algorithm.max_num_gen_batches"),
        ("algorithm.filter_groups.enable=true", "algorithm.rollout_allocation=dapo"),
    ],
)
def test_verls_dapo_keys_are_refused_naming_the_key_read_instead(override, instead):
    """Catches: a setting of verl's DAPO recipe silently ignored (DAPO here reads every allocator's keys)."""
    key = override.partition("=")[0]
    with pytest.raises(PCConfigError, match=rf"^{re.escape(key)}=.* not read here: set {re.escape(instead)} "):
        PCSettings.from_config(compose_pc_config(["algorithm.rollout_allocation=dapo", override]))


@pytest.mark.parametrize("value", ["0", "-2304", "2304.5", "'2304'", "true"])
def test_a_rollout_interval_that_is_not_a_positive_whole_number_is_refused_naming_the_key(value):
    with pytest.raises(PCConfigError, match=r"^trainer.val_rollout_interval=.* must be a (positive|whole) number"):
        PCSettings.from_config(compose_pc_config([f"trainer.val_rollout_interval={value}"]))


def test_the_rollout_interval_is_off_by_default_and_read_as_given():
    assert PCSettings.from_config(compose_pc_config([])).val_rollout_interval is None
    given = PCSettings.from_config(compose_pc_config(["trainer.val_rollout_interval=2304", "trainer.test_freq=-1"]))
    assert given.val_rollout_interval == 2304


@pytest.mark.parametrize(
    "override, key",
    [
        ("global_profiler.steps=[1,3]", "global_profiler.steps"),
        ("trainer.esi_redundant_time=60", "trainer.esi_redundant_time"),
        ("algorithm.adv_estimator=remax", "algorithm.adv_estimator"),
    ],
)
def test_stock_options_the_pc_loop_does_not_run_are_refused(override, key):
    with pytest.raises(PCConfigError, match=rf"^{re.escape(key)}=.* is not supported"):
        PCSettings.from_config(compose_pc_config([override]))


def test_stock_options_at_their_defaults_or_honoured_pass():
    explicit = PCSettings.from_config(
        compose_pc_config(["global_profiler.steps=null", "trainer.esi_redundant_time=0", "trainer.rollout_data_dir=/r"])
    )
    assert explicit == PCSettings.from_config(compose_pc_config([]))  # accepted, and they change no PC setting


# ---------------------------------------------------------------------- preflight (--validate)
@pytest.fixture
def valid_overrides(tmp_path):
    for name in ("train.parquet", "test.parquet"):
        write_parquet_rows(tmp_path / name)
    return passing_overrides(tmp_path / "train.parquet", tmp_path / "test.parquet", tmp_path / "model")


def test_preflight_passes_a_valid_config(valid_overrides):
    assert preflight(compose_pc_config(valid_overrides), fetch_model=False) == ([], [])


def _write_reward(tmp_path) -> str:
    path = tmp_path / "strict_reward.py"
    path.write_text("def score(data_source, solution_str, ground_truth, extra_info=None):\n    return 0.0\n")
    return str(path)


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (["algorithm.exploration.n=0"], "algorithm.exploration.n=0"),
        (["trainer.val_rollout_interval=0"], "trainer.val_rollout_interval=0 must be a positive number"),
        (["trainer.val_metrics=bootstrap"], "trainer.val_metrics='bootstrap'; choose one of ('mean', 'full')"),
        (["algorithm.prompt_filter=nope"], "algorithm.prompt_filter='nope'; choose one of ['all', 'skip']"),
        (["algorithm.prompt_filter=all", "algorithm.skip.enable=true"], "set one of them"),
        (
            ["trainer.n_gpus_per_node=3", "actor_rollout_ref.rollout.tensor_model_parallel_size=1"],
            "does not split over 3 data-parallel ranks",
        ),
        (["actor_rollout_ref.actor.ulysses_sequence_parallel_size=3"], "ulysses_sequence_parallel_size = 3"),
        # With sequence parallel 2, 4 GPUs are 2 data-parallel ranks: 128 rows split, so this passes ...
        (["actor_rollout_ref.actor.ulysses_sequence_parallel_size=2", "trainer.n_gpus_per_node=4"], None),
        # ... and 6 GPUs with sequence parallel 2 are 3 ranks, which 128 rows do not split over.
        (["actor_rollout_ref.actor.ulysses_sequence_parallel_size=2", "trainer.n_gpus_per_node=6"], "3 data-parallel"),
        (["actor_rollout_ref.actor.use_dynamic_bsz=false"], "ppo_micro_batch_size"),
        (["actor_rollout_ref.actor.loss_agg_mode=bogus"], "Invalid loss_agg_mode: bogus"),
        (["actor_rollout_ref.rollout.mode=sync"], "Rollout mode 'sync' has been removed"),
        (["actor_rollout_ref.actor.ppo_mini_batch_size=0"], "actor_rollout_ref.actor.ppo_mini_batch_size=0"),
        (["trainer.n_gpus_per_node=0"], "trainer.nnodes * trainer.n_gpus_per_node = 0 GPUs"),
        (["reward.custom_reward_function.reward_kwargs.grader=sympy"], "reward_kwargs.grader='sympy'"),
        (["reward.custom_reward_function.name=no_such_fn"], "reward.custom_reward_function: cannot load 'no_such_fn'"),
        (["reward.custom_reward_function.path=pkg://recipe.pc.rewards.nowhere"], "reward.custom_reward_function"),
        (["data.train_files=/nowhere/train.parquet"], "data.train_files: /nowhere/train.parquet"),
        (["data.val_files=[/nowhere/a.parquet,/nowhere/b.parquet]"], "data.val_files: /nowhere/b.parquet"),
        (["actor_rollout_ref.model.path=/nowhere/model"], "actor_rollout_ref.model.path=/nowhere/model (MODEL_PATH)"),
    ],
)
def test_preflight_names_each_failure(valid_overrides, overrides, expected):
    problems, _ = preflight(compose_pc_config(valid_overrides + overrides), fetch_model=False)
    if expected is None:
        assert problems == []
    else:
        errors = [p for p in problems if not p.startswith("not checked: ")]
        assert len(errors) == 1 and expected in errors[0], problems


def test_preflight_checks_reward_kwargs_against_the_function(valid_overrides, tmp_path):
    path = _write_reward(tmp_path)
    overrides = valid_overrides + [
        f"reward.custom_reward_function.path={path}",
        "reward.custom_reward_function.name=score",
    ]
    problems, _ = preflight(compose_pc_config(overrides), fetch_model=False)
    assert len(problems) == 1 and "reward_kwargs has ['grader'], which score does not take" in problems[0]


def test_preflight_reports_every_failure_and_notes_an_unchecked_hub_id(valid_overrides):
    overrides = valid_overrides + [
        "algorithm.exploration.n=0",
        "data.train_files=/nowhere/train.parquet",
        "actor_rollout_ref.model.path=HuggingFaceTB/SmolLM2-135M-Instruct",
    ]
    problems, notes = preflight(compose_pc_config(overrides), fetch_model=False)
    errors = [p for p in problems if not p.startswith("not checked: ")]
    assert len(errors) == 2 and len(problems) == 4  # the settings' checks across groups and the row split: not run
    assert notes == [
        "actor_rollout_ref.model.path=HuggingFaceTB/SmolLM2-135M-Instruct is a hub id: not checked in a dry run "
        "(fetched at launch)"
    ]


def test_hub_model_check_counts_a_cached_copy_and_explains_a_missing_one(tmp_path, monkeypatch):
    import huggingface_hub.constants

    from recipe.pc.startup_checks import hub_model_problem

    # What HF_HUB_OFFLINE=1 and HF_HOME=tmp_path give a fresh process (huggingface_hub reads them on import).
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    snapshot = tmp_path / "hub" / "models--org--tiny" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (tmp_path / "hub" / "models--org--tiny" / "refs").mkdir()
    (tmp_path / "hub" / "models--org--tiny" / "refs" / "main").write_text("a" * 40)
    assert hub_model_problem("org/tiny") is None
    message = hub_model_problem("org/absent")
    assert "'org/absent' is not in the local Hugging Face cache and cannot be fetched" in message
    assert "MODEL_PATH=DIR" in message


def _runtime_env_of(config) -> dict:
    """What verl 0.9.1's run_ppo hands ray.init: its default runtime env merged with ray_kwargs.ray_init.runtime_env
    (verl/trainer/main_ppo.py, run_ppo)."""
    from omegaconf import OmegaConf
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    given = config.ray_kwargs.get("ray_init", {}).get("runtime_env", {})
    return OmegaConf.to_container(OmegaConf.merge(get_ppo_ray_runtime_env(config), given))


def test_main_forwards_the_launchers_env_to_a_ray_cluster_started_beforehand(monkeypatch):
    # On a cluster started by ray_cluster.sh the TaskRunner does not inherit the driver's environment:
    # the first two-node GPU run wrote its metrics to verl's default path instead of VERL_FILE_LOGGER_PATH.
    from recipe.pc import main_pc

    captured = {}
    monkeypatch.setattr(main_pc, "run_ppo", lambda config, task_runner_class: captured.setdefault("config", config))
    monkeypatch.setattr(main_pc, "_report_and_exit_on_problems", lambda config, fetch_model: None)
    monkeypatch.setattr(main_pc, "auto_set_device", lambda config: None)
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", "/runs/a/metrics.jsonl")
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.delenv("TENSORBOARD_DIR", raising=False)
    main_pc.main(compose_pc_config(["+ray_kwargs.ray_init.runtime_env.env_vars.WANDB_MODE=offline"]))
    env_vars = _runtime_env_of(captured["config"])["env_vars"]
    assert env_vars["VERL_FILE_LOGGER_PATH"] == "/runs/a/metrics.jsonl"
    assert env_vars["WANDB_MODE"] == "offline"  # a value given in the config wins
    assert "TENSORBOARD_DIR" not in env_vars  # unset here: not invented


def test_forward_driver_env_names_what_it_added():
    from recipe.pc.main_pc import forward_driver_env

    config = compose_pc_config([])
    assert forward_driver_env(config, {"VERL_FILE_LOGGER_ROOT": "/logs", "UNRELATED": "x"}) == ["VERL_FILE_LOGGER_ROOT"]
    assert _runtime_env_of(config)["env_vars"]["VERL_FILE_LOGGER_ROOT"] == "/logs"
    assert "UNRELATED" not in _runtime_env_of(config)["env_vars"]


def test_pc_log_lines_reach_the_console_inside_a_ray_actor(monkeypatch):
    # A Ray actor has no logging handler: the "saved PC state" lines of the resume check never printed.
    import io
    import logging

    from recipe.pc.main_pc import configure_pc_logging

    package = logging.getLogger("recipe.pc")
    before = (list(package.handlers), package.level, package.propagate)
    monkeypatch.delenv("PC_LOGGING_LEVEL", raising=False)
    stream = io.StringIO()
    try:
        configure_pc_logging(stream)
        configure_pc_logging(stream)  # idempotent: one handler, each line once
        logging.getLogger("recipe.pc.pc_ray_trainer").info("saved PC state at step %d: %s", 4, "buffer 8")
        logging.getLogger("recipe.pc.checkpoint").debug("not at INFO")
        assert stream.getvalue() == "INFO recipe.pc.pc_ray_trainer: saved PC state at step 4: buffer 8\n"
        # PC_LOGGING_LEVEL governs the trainer's own lines too (no module-level level overrides it).
        monkeypatch.setenv("PC_LOGGING_LEVEL", "warning")
        configure_pc_logging(stream)
        logging.getLogger("recipe.pc.pc_ray_trainer").info("resumed PC state at step 4")
        assert "resumed" not in stream.getvalue()
        monkeypatch.setenv("PC_LOGGING_LEVEL", "chatty")
        configure_pc_logging(stream)
        assert "PC_LOGGING_LEVEL=CHATTY is not a logging level" in stream.getvalue()
        assert package.level == logging.INFO
    finally:
        package.handlers[:] = before[0]
        package.setLevel(before[1])
        package.propagate = before[2]


def test_every_setting_has_one_default_in_the_yaml_or_in_its_owner():
    """A core setting's default lives in pc_trainer.yaml only (no default in code); a registered key group's (an
    allocator's, a filter's, down-sampling's) in its owner's code only, not in the YAML. Every key the settings read
    is in the composed config either way."""
    import dataclasses

    from recipe.pc.registry import KEY_GROUPS
    from recipe.pc.settings import CONFIG_FILE

    absent = object()
    composed, yaml = compose_pc_config([]), OmegaConf.load(CONFIG_FILE)
    assert {"downsample", "dapo", "knapsack", "skip"} <= set(KEY_GROUPS)
    owned = {k for group in KEY_GROUPS.values() for k in group.defaults()}
    for key in PCSettings.keys():
        assert OmegaConf.select(composed, key, default=absent) is not absent, key
        node, _, leaf = key.rpartition(".")
        parent = OmegaConf.select(yaml, node, default=None)  # the leaf itself may interpolate keys of verl's
        in_yaml = parent is not None and leaf in parent
        if key in owned:
            assert not in_yaml, f"{key} is its owner's, but pc_trainer.yaml sets it too"
        elif key.startswith("algorithm.") or key == "data.gen_batch_size":
            assert in_yaml, f"{key} is not in pc_trainer.yaml"

    def groups(cls):
        hints = __import__("typing").get_type_hints(cls)
        yield cls
        for f in dataclasses.fields(cls):
            if "key" not in f.metadata and not f.metadata.get("owned"):
                yield from groups(hints[f.name])

    for group in groups(PCSettings):
        for f in dataclasses.fields(group):
            if not f.metadata.get("owned"):
                assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, (group, f.name)


def test_unknown_tie_order_is_refused_naming_the_key():
    with pytest.raises(PCConfigError, match="algorithm.buffer_tie_order='older'"):
        PCSettings.from_config(compose_pc_config(["algorithm.buffer_tie_order=older"]))
    with pytest.raises(PCConfigError, match="algorithm.dapo_step_unit='rounds'"):
        PCSettings.from_config(compose_pc_config(["algorithm.dapo_step_unit=rounds"]))


@pytest.mark.parametrize("switch", ["bypass_mode", "rollout_is", "rollout_rs"])
def test_rollout_correction_is_refused_at_start_up_before_ray(switch, valid_overrides):
    value = "true" if switch == "bypass_mode" else "token"
    config = compose_pc_config([*valid_overrides, f"algorithm.rollout_correction.{switch}={value}"])
    problems, _ = preflight(config, fetch_model=False)
    problems = [p for p in problems if not p.startswith("not checked: ")]
    assert len(problems) == 1 and problems[0].startswith("algorithm.rollout_correction is on, but reused pilot"), (
        problems
    )


def test_every_bad_setting_is_named_at_once_and_what_could_not_be_checked_says_so(valid_overrides):
    """One dry run lists every bad key, of the core groups and of the registered ones; the checks that need them are
    named as not checked, never reported as second errors."""
    from recipe.pc.settings import NOT_CHECKED
    from recipe.pc.startup_checks import PARALLEL_NOT_CHECKED

    bad = ["algorithm.exploration.n=0", "algorithm.buffer_size=x", "algorithm.knapsack.unit=3"]
    bad.append("algorithm.skip.p_min=2")
    problems, _ = preflight(compose_pc_config([*valid_overrides, *bad]), fetch_model=False)
    assert problems == [
        "algorithm.exploration.n=0 must be at least 1",
        "algorithm.buffer_size='x' (str) must be a whole number",
        "algorithm.knapsack.min_commit=4 must be a multiple of algorithm.knapsack.unit=3",
        "algorithm.skip.p_min=2.0, algorithm.skip.p_init=0.5 and algorithm.skip.p_max=0.95 must satisfy "
        "0 < p_min <= p_init <= p_max <= 1",
        NOT_CHECKED,
        PARALLEL_NOT_CHECKED,
    ]


def test_a_key_that_two_settings_read_is_named_once(valid_overrides):
    # algorithm.exploration.n is the pilot size and the fallback of algorithm.exploration.n_effective
    problems, _ = preflight(compose_pc_config([*valid_overrides, "algorithm.exploration.n=1.5"]), fetch_model=False)
    assert [p for p in problems if "exploration" in p] == ["algorithm.exploration.n=1.5 (float) must be a whole number"]


def test_the_knapsack_on_a_paper_scripts_rollout_n_names_every_value_to_set_in_one_run(valid_overrides):
    knapsack = ["algorithm.rollout_allocation=knapsack", "actor_rollout_ref.rollout.n=96", "algorithm.downsample.n=100"]
    problems, _ = preflight(compose_pc_config([*valid_overrides, *knapsack]), fetch_model=False)
    assert [p.split(":")[0] for p in problems[:3]] == [
        "actor_rollout_ref.rollout.n=96 must lie in [algorithm.knapsack.min_commit=4, "
        "algorithm.knapsack.max_commit=32], so that uniform sizing is one of the allocations",
        "algorithm.downsample.n=100 down-samples commits of one size; algorithm.rollout_allocation=knapsack sizes each "
        "commit itself",
        "algorithm.rollout_allocation=knapsack trains full steps only (its groups differ in size, so an unfilled step "
        "cannot be cut to whole mini-batches by its prompt count)",
    ]
    assert problems[0].endswith("set algorithm.knapsack.max_commit=192")
    fixed = [*knapsack[:2], "algorithm.knapsack.max_commit=192", "algorithm.min_train_prompts=8"]
    problems, _ = preflight(compose_pc_config([*valid_overrides, *fixed]), fetch_model=False)
    assert not [p for p in problems if "knapsack" in p]


def test_the_v1_trainer_and_a_logger_verl_lacks_are_refused_and_switched_off_wandb_is_noted(
    valid_overrides, monkeypatch
):
    bad = ["trainer.use_v1=true", "trainer.logger=[console,wandbb]"]
    problems, _ = preflight(compose_pc_config([*valid_overrides, *bad]), fetch_model=False)
    assert problems[0].startswith("trainer.use_v1=true asks for verl's V1 trainer") and len(problems) == 2
    assert problems[1].startswith("trainer.logger has ['wandbb'], which verl does not have; choose from ['wandb'")
    monkeypatch.setenv("WANDB_MODE", "disabled")
    problems, notes = preflight(compose_pc_config([*valid_overrides, "trainer.logger=[console,wandb]"]), False)
    assert problems == [] and notes == [
        "trainer.logger has wandb but WANDB_MODE=disabled (the one-GPU scripts set it), so W&B will log nothing: "
        "export WANDB_MODE=online (or offline) first"
    ]
