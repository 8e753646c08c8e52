"""What a new user meets in the first hour, checked in-process: the start-up checks name a launch without a GPU, an
incomplete model folder, too few train rows and a missing grader package; a misspelt key gets the closest real key;
verl's known warnings are filtered; a finished run leaves no DataLoader worker behind; plan does not recommend what
lost when measured; the state converter names a file it cannot read; every third-party import is declared in
pyproject.toml."""

import ast
import contextlib
import io
import json
import logging
import multiprocessing
import os
import re
import sys
import warnings
from contextlib import redirect_stderr
from types import SimpleNamespace

import pandas as pd
import pytest
from omegaconf import OmegaConf
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from support import ROOT, changed, valid_overrides

from recipe.pc import main_pc, startup_checks
from recipe.pc.known_warnings import KNOWN_VERL_WARNINGS, filter_known_warnings
from recipe.pc.main_pc import unknown_key_problems
from recipe.pc.startup_checks import preflight
from recipe.pc.testing import build_trainer, compose_pc_config


# ---------------------------------------------------------------------- a config that passes every check
def write_rows(path, rows: int, models: dict | None = None) -> str:
    """``rows`` verl rows; ``models``: the reward_model of some rows, by row number."""
    frame = pd.DataFrame(
        {
            "prompt": [[{"role": "user", "content": f"What is {i} + 1?"}] for i in range(rows)],
            "reward_model": [(models or {}).get(i, {"ground_truth": str(i + 1), "style": "rule"}) for i in range(rows)],
            "extra_info": [{"index": i} for i in range(rows)],
        }
    )
    frame.to_parquet(path)
    return str(path)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A config that passes every check (composed once: each test changes a copy)."""
    root = tmp_path_factory.mktemp("first_hour")
    train, test = write_rows(root / "train.parquet", 16), write_rows(root / "test.parquet", 4)
    return compose_pc_config(valid_overrides(train, test, root / "model"))


def problems_of(base, fetch_model=False, **values) -> list[str]:
    problems, _ = preflight(changed(base, **values), fetch_model=fetch_model)
    return problems


def test_the_valid_config_passes(base):
    assert problems_of(base) == []


@pytest.mark.parametrize(
    ("nodes", "per_node", "tp", "dp", "fits"),
    [
        (1, 1, 2, 1, "1"),  # verl's default TP 2 on one GPU
        (1, 4, 3, 1, "1 or 2"),  # 4 GPUs do not split into engines of 3
        (2, 4, 6, 1, "1 or 2 or 4"),
        (3, 2, 3, 1, "1 or 2"),  # 6 GPUs hold two engines of 3, but each would straddle a node
        (1, 4, 2, 2, None),
        (2, 4, 8, 1, None),  # an engine of two whole nodes
    ],
)
def test_a_rollout_engine_must_tile_the_gpus(base, nodes, per_node, tp, dp, fits):
    rollout = {"tensor_model_parallel_size": tp, "data_parallel_size": dp}
    values = {f"actor_rollout_ref__rollout__{key}": size for key, size in rollout.items()}
    found = [
        p
        for p in problems_of(base, trainer__nnodes=nodes, trainer__n_gpus_per_node=per_node, **values)
        if p.startswith("actor_rollout_ref.rollout: a rollout engine")
    ]
    if fits is None:
        assert found == []
    else:
        engine, world = tp * dp, nodes * per_node
        assert found == [
            f"actor_rollout_ref.rollout: a rollout engine takes tensor_model_parallel_size {tp} × data_parallel_size "
            f"{dp} × pipeline_model_parallel_size 1 = {engine} GPUs, which do not tile trainer.nnodes × "
            f"trainer.n_gpus_per_node = {world} ({per_node} a node): set "
            f"actor_rollout_ref.rollout.tensor_model_parallel_size so the product is {fits}"
        ]


# ---------------------------------------------------------------------- a launch without a GPU
@pytest.fixture
def cpu_machine(monkeypatch):
    """No CUDA device and no Ray cluster to join, whatever the machine running the tests has."""
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr(startup_checks, "get_platform", lambda: SimpleNamespace(device_name="cuda"))
    monkeypatch.setattr(startup_checks, "_joins_ray_cluster", lambda config: False)


def test_a_launch_without_a_gpu_stops_with_one_line(base, cpu_machine):
    problems = problems_of(base, fetch_model=True)
    assert len(problems) == 1, problems
    assert problems[0].startswith("the run needs trainer.nnodes * trainer.n_gpus_per_node = 4 GPU(s)")
    assert "0 visible CUDA device(s)" in problems[0] and "DRY_RUN=1" in problems[0]


def test_gpus_are_counted_only_on_a_launch_that_starts_its_own_ray(base, cpu_machine, monkeypatch):
    assert problems_of(base, fetch_model=False) == []  # a dry run
    assert problems_of(base, fetch_model=True, trainer__device="cpu") == []
    monkeypatch.setattr(startup_checks, "_joins_ray_cluster", lambda config: True)
    assert problems_of(base, fetch_model=True) == []  # a driver joining a cluster may be a head node without GPUs


def test_an_address_to_join_counts_as_a_cluster(monkeypatch):
    config = OmegaConf.create({"ray_kwargs": {"ray_init": {"num_cpus": None}}})
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert startup_checks._joins_ray_cluster(config)
    monkeypatch.delenv("RAY_ADDRESS")
    config.ray_kwargs.ray_init.address = "10.0.0.2:6379"
    assert startup_checks._joins_ray_cluster(config)


def test_an_explicit_cpu_device_is_checked_before_verl_turns_it_into_cuda(base, cpu_machine, monkeypatch):
    # verl's auto_set_device replaces trainer.device=cpu with the detected (or fallback) accelerator.
    monkeypatch.setattr(main_pc, "auto_set_device", lambda config: config.trainer.__setattr__("device", "cuda"))
    launched = []
    monkeypatch.setattr(main_pc, "run_ppo", lambda config, task_runner_class: launched.append(config))
    main_pc.main(changed(base, trainer__device="cpu"))
    assert len(launched) == 1


# ---------------------------------------------------------------------- model folder, train rows, grader packages
@pytest.mark.parametrize(
    "keep, lacks",
    [
        ((), "has no config.json, no weights (*.safetensors, pytorch_model*.bin), no tokenizer ("),
        (("config.json", "model.safetensors"), "has no tokenizer (tokenizer.json, tokenizer.model"),
        (("config.json", "tokenizer.json"), "has no weights ("),
    ],
)
def test_an_incomplete_model_folder_is_named(base, tmp_path, keep, lacks):
    for name in keep:
        (tmp_path / name).write_text("{}")
    problems = problems_of(base, actor_rollout_ref__model__path=str(tmp_path))
    assert len(problems) == 1 and problems[0].startswith(f"actor_rollout_ref.model.path={tmp_path} (MODEL_PATH) ")
    assert lacks in problems[0] and "hf download" in problems[0]


def test_a_tokenizer_folder_of_its_own_is_checked_there(base, tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    (tmp_path / "model" / "model-00001-of-00002.safetensors").write_text("")
    (tmp_path / "tok").mkdir()
    paths = {
        "actor_rollout_ref__model__path": f"{tmp_path}/model",
        "actor_rollout_ref__model__tokenizer_path": f"{tmp_path}/tok",
    }
    problems = problems_of(base, **paths)
    assert len(problems) == 1 and problems[0].startswith(f"actor_rollout_ref.model.tokenizer_path={tmp_path}/tok has")
    (tmp_path / "tok" / "tokenizer.model").write_text("")
    assert problems_of(base, **paths) == []


def test_a_hub_id_is_still_only_noted_in_a_dry_run(base):
    config = changed(base, actor_rollout_ref__model__path="HuggingFaceTB/SmolLM2-135M-Instruct")
    problems, notes = preflight(config, fetch_model=False)
    assert problems == [] and notes[0].endswith("is a hub id: not checked in a dry run (fetched at launch)")


def test_a_train_set_smaller_than_one_generation_batch_is_named(base, tmp_path):
    small = write_rows(tmp_path / "small.parquet", 160)
    assert problems_of(base, data__train_files=small, data__gen_batch_size=384) == [
        f"data.train_files ({small}) have 160 rows, fewer than one generation batch (data.gen_batch_size=384): "
        "use a larger train set or lower data.gen_batch_size"
    ]
    # Rows of several files add up, and train_max_samples caps them.
    assert problems_of(base, data__train_files=[small, small], data__gen_batch_size=320) == []
    capped = problems_of(base, data__train_files=small, data__gen_batch_size=16, data__train_max_samples=8)
    assert len(capped) == 1 and "have 8 rows (data.train_max_samples=8 of 160)" in capped[0]


def test_a_data_file_verl_cannot_read_is_named(base, tmp_path):
    (tmp_path / "rows.csv").write_text("a\n1\n")
    assert problems_of(base, data__val_files=[str(tmp_path / "rows.csv")]) == [
        f"data.val_files: {tmp_path}/rows.csv is not a .parquet, .json, .jsonl file, the formats verl reads"
    ]


def test_missing_data_names_how_the_launcher_makes_it(base, monkeypatch):
    monkeypatch.setenv("PC_DATA_HINT", "write them with: bash data/e2e_process_data.sh")
    assert problems_of(base, data__train_files="/nowhere/train.parquet") == [
        "data files not found: data.train_files: /nowhere/train.parquet; write them with: bash data/e2e_process_data.sh"
    ]


@pytest.mark.parametrize(
    "grader, absent, named",
    [
        (None, "math_verify", "needs math-verify"),  # compute_score's own default, the improved preset's grader
        ("reference", "sympy", "needs sympy"),
        ("reference", "pylatexenc", "needs pylatexenc"),
        ("math_dapo", "math_verify", None),
    ],
)
def test_a_grader_without_its_package_is_named(base, monkeypatch, grader, absent, named):
    monkeypatch.setitem(sys.modules, absent, None)  # importlib.util.find_spec then finds nothing
    problems = problems_of(base, reward__custom_reward_function__reward_kwargs__grader=grader)
    if named is None:
        assert problems == []
    else:
        assert len(problems) == 1 and named in problems[0] and "pip install -e '.[math]'" in problems[0], problems
        assert problems[0].startswith(f"reward.custom_reward_function.reward_kwargs.grader={grader or 'math_verify'} ")


# ---------------------------------------------------------------------- bad ground truths: a warning, never a failure
def bad_ground_truth_files(tmp_path) -> tuple[str, list[str]]:
    """A train file with blank, empty and missing ground truths, a validation file of integer ones and a JSON-lines
    validation file mixing them, each with the warning line it should get."""
    train = write_rows(
        tmp_path / "train.parquet",
        16,
        {2: {"ground_truth": "", "style": "rule"}, 5: {"ground_truth": "  ", "style": "rule"}, 7: None}
        | {i: {"ground_truth": None, "style": "rule"} for i in range(9, 14)},
    )
    numbers = tmp_path / "numbers.parquet"
    pd.DataFrame({"reward_model": [{"ground_truth": i} for i in range(4)]}).to_parquet(numbers)
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(
        "\n".join(json.dumps(row) for row in [{"reward_model": {"ground_truth": "1"}}, {"reward_model": {}}, {}])
        + '\n{"reward_model": {"ground_truth": 2.5}}\n'
    )
    line = (
        "{key}: {path}: {bad} rows have an empty, missing or non-string reward_model.ground_truth or a null "
        "reward_model ({counts}; rows {rows}); they are graded, never stopping the run (docs/reference-preset.md says "
        "how), but fix the data if they are not meant to be there"
    )
    expected = [  # key, path, bad rows, their kinds, the rows shown
        ("data.train_files", train, "8 of 16", "2 empty, 5 missing, 1 null reward_model", "2, 5, 7, 9, 10, ..."),
        ("data.val_files", str(numbers), "4 of 4", "4 non-string", "0, 1, 2, 3"),
        ("data.val_files", str(mixed), "3 of 4", "1 missing, 1 non-string, 1 null reward_model", "1, 2, 3"),
    ]
    keys = ("key", "path", "bad", "counts", "rows")
    return [train, str(numbers), str(mixed)], [line.format(**dict(zip(keys, e, strict=True))) for e in expected]


def test_bad_ground_truths_are_one_warning_line_a_file_in_a_dry_run_and_before_ray(base, tmp_path, monkeypatch):
    (train, *val), expected = bad_ground_truth_files(tmp_path)
    config = changed(base, data__train_files=train, data__val_files=val)
    assert startup_checks.ground_truth_warnings(config) == expected
    # --validate (DRY_RUN=1 in the scripts): warned, and the checks still pass.
    err = io.StringIO()
    with redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        main_pc.validate(config)
    warned = [line.removeprefix("warning: ") for line in err.getvalue().splitlines() if line.startswith("warning: ")]
    assert warned == expected and err.getvalue().endswith("config checks passed\n")
    # A launch: warned before verl's run_ppo starts Ray.
    seen_at_launch = []
    monkeypatch.setattr(main_pc, "run_ppo", lambda config, task_runner_class: seen_at_launch.append(err.getvalue()))
    monkeypatch.setattr(startup_checks, "_check_gpus", lambda config: None)
    err = io.StringIO()
    with redirect_stderr(err):
        main_pc.main(config)
    assert [line for line in seen_at_launch[0].splitlines() if line.startswith("warning: ")] == [
        f"warning: {line}" for line in expected
    ]


def test_good_ground_truths_and_unreadable_files_warn_nothing(base, tmp_path):
    assert startup_checks.ground_truth_warnings(base) == []
    (tmp_path / "empty.parquet").write_bytes(b"")  # left to the dataset loader, which names it at launch
    assert startup_checks.ground_truth_warnings(changed(base, data__val_files=[str(tmp_path / "empty.parquet")])) == []


# ---------------------------------------------------------------------- misspelt keys
def test_a_misspelt_key_gets_the_closest_real_key():
    assert unknown_key_problems(["algorithm.exploraton.n=3", "data.train_batch_size=4", "presett=reference"]) == [
        "algorithm.exploraton.n is not a config key: did you mean algorithm.exploration.n?",
        "presett is not a config key: did you mean preset?",
    ]
    # + adds a key where what a node holds is free (keyword arguments, an empty node), not to a fixed group.
    added = ["+actor_rollout_ref.model.override_config.attn_implementation=sdpa", "+ray_kwargs.ray_init._temp_dir=/t"]
    added += ["+reward.custom_reward_function.reward_kwargs.grader=math_dapo", "preset=reference"]
    assert unknown_key_problems(added) == []
    assert unknown_key_problems(["+algorithm.exploration.nn=3", "+brand.new.key=1", "+trainer.n_gpus_per_nod=2"]) == [
        "+algorithm.exploration.nn is not a config key: did you mean algorithm.exploration.n?",
        "+brand.new.key adds a key to a group whose keys are fixed, so nothing would read it (nothing close)",
        "+trainer.n_gpus_per_nod is not a config key: did you mean trainer.n_gpus_per_node?",
    ]
    assert unknown_key_problems(["preset=no_such_preset"]) == []  # not a key: Hydra's own message names it


def test_the_entry_point_stops_on_a_misspelt_key_before_hydra(monkeypatch):
    ran = []
    monkeypatch.setattr(main_pc, "validate", lambda: ran.append(list(sys.argv[1:])))
    monkeypatch.setattr(sys, "argv", ["main_pc.py"])
    err = io.StringIO()
    with redirect_stderr(err), pytest.raises(SystemExit) as stop:
        main_pc.entry(["--validate", "trainer.n_gpu_per_node=2"])
    assert stop.value.code == 1 and ran == []
    lines = err.getvalue().splitlines()
    assert lines[0].startswith("pilot-commit dry run: ")  # the recipe's own line comes first
    assert lines[1:] == [
        "config error: trainer.n_gpu_per_node is not a config key: did you mean trainer.n_gpus_per_node?"
    ]
    with redirect_stderr(io.StringIO()):
        main_pc.entry(["--validate", "trainer.n_gpus_per_node=2"])
    assert ran == [["trainer.n_gpus_per_node=2"]]  # --validate is the entry point's, not Hydra's


def test_show_config_goes_with_validate(monkeypatch):
    ran = []
    monkeypatch.setattr(main_pc, "validate_and_show_config", lambda: ran.append(("shown", sys.argv[1:])))
    monkeypatch.setattr(main_pc, "main", lambda: ran.append(("launched", sys.argv[1:])))
    monkeypatch.setattr(sys, "argv", ["main_pc.py"])
    with redirect_stderr(io.StringIO()):
        main_pc.entry(["--show-config", "--validate", "trainer.n_gpus_per_node=2"])
    assert ran == [("shown", ["trainer.n_gpus_per_node=2"])]  # neither flag reaches Hydra
    err = io.StringIO()
    with redirect_stderr(err), pytest.raises(SystemExit) as stop:
        main_pc.entry(["--show-config", "trainer.n_gpus_per_node=2"])
    assert stop.value.code == 1 and len(ran) == 1  # no launch
    assert err.getvalue() == (
        "config error: --show-config goes with --validate (DRY_RUN=1 SHOW_CONFIG=1 in the scripts)\n"
    )


# ---------------------------------------------------------------------- verl's known warnings
@pytest.mark.parametrize(
    "source, message",
    [
        ("warnings", "megatron engine is not available: ModuleNotFoundError(\"No module named 'megatron'\")"),
        ("warnings", "torchtitan engine is not available: ModuleNotFoundError(\"No module named 'torchtitan'\")"),
        ("warnings", "Disabled critic as algorithm.adv_estimator != gae. If it is not intended, please set ..."),
        ("warnings", "Warning: Class 'verl.trainer.ppo.ray_trainer.RayPPOTrainer' is deprecated. Please use ..."),
        ("verl.plugin.platform.platform_manager", "No supported accelerator detected. Registered: ('nvidia',)."),
        (
            "verl.plugin.platform.platform_manager",
            "Platform 'nvidia' (PlatformCUDA) is registered but not available. This may be due to ...",
        ),
    ],
)
def test_known_verl_warnings_are_filtered_and_others_are_not(source, message, caplog):
    assert any(s == source and re.match(p, message) for s, p in KNOWN_VERL_WARNINGS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        filter_known_warnings()
        filter_known_warnings()  # idempotent
        if source == "warnings":
            warnings.warn(message, UserWarning, stacklevel=1)
        warnings.warn("an unrelated warning", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["an unrelated warning"]
    if source != "warnings":
        log = logging.getLogger(source)
        with caplog.at_level(logging.WARNING, logger=source):
            log.warning(message)
            log.warning("another platform message")
        assert [r.getMessage() for r in caplog.records] == ["another platform message"]


# ---------------------------------------------------------------------- a run's end
def test_a_finished_run_leaves_no_dataloader_worker_alive(tmp_path, tokenizer, monkeypatch):
    """verl builds the train loader with torchdata's StatefulDataLoader, which keeps its iterator, and a run stops
    mid-epoch: its workers outlived fit(). Ray SIGKILLs an actor's child processes as the actor exits, and torch's
    SIGCHLD handler then printed "DataLoader worker (pid ...) is killed by signal: Killed" after a good run."""
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "metrics.jsonl"))
    # Loader workers of their own; 2 steps of 8 generation batches: the run ends mid-epoch.
    extra = ("data.dataloader_num_workers=2", "trainer.total_training_steps=2")
    trainer = build_trainer(tmp_path, tokenizer, probs=[0.5] * 64, agent_workers=2, extra=extra)
    before = set(multiprocessing.active_children())
    trainer.fit()
    assert trainer.global_steps == 2 and trainer.train_dataloader._iterator is not None  # it did stop mid-epoch
    assert [p for p in multiprocessing.active_children() if p not in before] == []


# ---------------------------------------------------------------------- plan
def test_plan_does_not_recommend_what_lost_when_measured(tmp_path, capsys):
    from recipe.pc_tools import plan

    # 16 prompts, 10 rollouts each, pass rates spread over [0, 1]: the cost model's cheapest is PC 4+12 at G=8.
    wins = [0, 0, 1, 2, 3, 4, 4, 5, 5, 6, 7, 8, 9, 10, 10, 10]
    rows = [{"prompt_id": p, "acc": k < w} for p, w in enumerate(wins) for k in range(10)]
    (tmp_path / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["predict", str(tmp_path), "--train-batch-size", "4", "--gen-batch-size", "8"]
    assert plan.main(args) == 0
    out = capsys.readouterr().out.splitlines()
    passed_over = [line for line in out if line.startswith("not recommended: ")]
    assert passed_over and passed_over[0].startswith("not recommended: PC 4+12 G=8, the model's fewest"), out
    assert "1.12x (default mix)" in passed_over[0]
    # Nor, right after, a split the model alone priced: no row of this grid was measured to beat GRPO.
    assert not [line for line in out if line.startswith("recommended")]
    assert out[-1].startswith("no recommendation: no split was measured to reach GRPO's accuracy")


# ---------------------------------------------------------------------- declared dependencies
# Modules whose distribution is named differently.
DISTRIBUTIONS = {
    "yaml": "pyyaml",
    "hydra": "hydra-core",
    "huggingface_hub": "huggingface-hub",
    "math_verify": "math-verify",
    "sklearn": "scikit-learn",
    "PIL": "pillow",
}


if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

# The repository's own modules that scripts and tests import by file name (data/math_common.py, tests/support.py)
# or as a folder (data.process_arithmetic).
LOCAL_FOLDERS = ("data", "scripts", "tests", "benchmarks")
LOCAL_MODULES = set(LOCAL_FOLDERS) | {
    name.removesuffix(".py")
    for folder in LOCAL_FOLDERS
    for _, _, files in os.walk(os.path.join(ROOT, folder))
    for name in files
    if name.endswith(".py")
}


def third_party_imports(folders: list[str]) -> dict[str, str]:
    """Top-level modules imported anywhere under ``folders`` (functions included) that are neither the standard
    library nor the repository's own, each with a file that imports it."""
    found = {}
    for folder in folders:
        for base, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in (f for f in files if f.endswith(".py")):
                path = os.path.join(base, name)
                for node in ast.walk(ast.parse(open(path).read(), path)):
                    if isinstance(node, ast.Import):
                        modules = [a.name for a in node.names]
                    elif isinstance(node, ast.ImportFrom) and node.level == 0:
                        modules = [node.module]
                    else:
                        continue
                    for module in modules:
                        top = module.split(".")[0]
                        if top not in sys.stdlib_module_names and top not in LOCAL_MODULES and top != "recipe":
                            found.setdefault(top, os.path.relpath(path, ROOT))
    return found


def declared(for_tests: bool) -> set[str]:
    """The dependencies, with the test extra alone (what the test command installs) or with every other extra."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    groups = project["optional-dependencies"]
    extras = [r for name, reqs in groups.items() if (name == "test") == for_tests for r in reqs]
    return {canonicalize_name(Requirement(r).name) for r in project["dependencies"] + extras}


def undeclared(imported: dict[str, str], names: set[str]) -> dict[str, str]:
    return {m: where for m, where in imported.items() if canonicalize_name(DISTRIBUTIONS.get(m, m)) not in names}


def test_every_third_party_import_is_declared():
    imported = third_party_imports(["recipe", "data", "scripts", "benchmarks"])
    assert {"torch", "omegaconf", "math_verify", "matplotlib", "safetensors"} <= imported.keys()  # lazy ones too
    missing = undeclared(imported, declared(for_tests=False))
    assert missing == {}, f"imported but not in pyproject.toml's dependencies or extras: {missing}"


def test_every_import_of_the_tests_is_declared_with_the_test_extra():
    imported = third_party_imports(["tests"])
    assert {"pytest", "transformers", "packaging"} <= imported.keys()
    missing = undeclared(imported, declared(for_tests=True))
    assert missing == {}, f"imported by tests but not in pyproject.toml (the test extra): {missing}"


def test_the_report_folder_is_git_ignored():
    # python -m recipe.pc_tools.report writes report/ under the working directory by default (its --out).
    from recipe.pc_tools.report import DEFAULT_OUT

    with open(os.path.join(ROOT, ".gitignore")) as f:
        patterns = {line.strip() for line in f}
    assert {f"/{DEFAULT_OUT}/", f"{DEFAULT_OUT}/"} & patterns


def test_help_names_validate_and_show_config_before_hydras_own_help(capsys, monkeypatch):
    ran = []
    monkeypatch.setattr(main_pc, "main", lambda: ran.append(list(sys.argv[1:])))  # Hydra's help runs from there
    main_pc.entry(["--help"])
    assert capsys.readouterr().out == main_pc.USAGE + "\n" and ran == [["--help"]]
    assert "--validate     run every start-up check that needs no GPU" in main_pc.USAGE
    assert "--show-config  with --validate: print the composed config first" in main_pc.USAGE


def test_the_converter_names_a_file_it_cannot_read(tmp_path, capsys):
    """A truncated or foreign state file gets one line naming it, not a traceback."""
    from recipe.pc import convert_state

    path = tmp_path / "pilot_commit_state.pt"
    path.write_bytes(b"PK\x03\x04 not a whole zip")
    assert convert_state.main([str(path), "--rollout-n", "4"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"cannot read {path} as a torch.save file: ") and err.count("\n") == 1, err
    assert path.read_bytes() == b"PK\x03\x04 not a whole zip"  # nothing replaced
