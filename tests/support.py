"""Helpers shared by the test folders (unit, fit, scripts, docs); no test module imports another.

- paths of the repository, the tests and their committed fixtures;
- ``env_file_logger``: the metrics of a trainer a test builds and fits itself (``recipe.pc.testing.build_trainer``, the
  stand-ins and the resume helpers live in the installed test kit, ``recipe.pc.testing``);
- an allocator round by round: ``round_of`` and the rows it takes;
- the launch scripts: ``script_command_line`` (the Hydra overrides a script hands the trainer, run by bash alone),
  ``dry_run`` (those overrides composed and checked in-process, as ``DRY_RUN=1`` does in a Python process of its
  own), ``validate_script`` (what that dry run prints, through main_pc's own dry run, in-process), stand-in data and
  model folders, and ``run_script`` for the few checks that run a script for real.

Heavy modules (torch, verl, the test kit) are imported where they are used, so that a test needing only a path
does not pay for them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import re
import subprocess
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)
FIXTURES = os.path.join(TESTS, "fixtures")
TRAIN_SCRIPTS = os.path.join(ROOT, "train_scripts")
# The venv's interpreter first on PATH: the launchers call `python3`.
VENV_PATH = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]


def changed(base, **values):
    """A copy of a composed config with ``values`` set (keys with "__" for "."); None deletes a key. Faster than
    composing again, for tests that vary a few values of one config."""
    import copy

    from omegaconf import OmegaConf, open_dict

    config = copy.deepcopy(base)
    for name, value in values.items():
        key = name.replace("__", ".")
        if value is None:
            node, _, leaf = key.rpartition(".")
            with open_dict(config):
                del OmegaConf.select(config, node)[leaf]
        else:
            OmegaConf.update(config, key, value, force_add=True)
    return config


def run_module(module: str, *args: str) -> int:
    """``python -m module ARGS`` in this process, its ``__main__`` block included; returns the exit status."""
    import runpy
    import warnings

    saved = sys.argv
    sys.argv = [module, *args]
    try:
        with warnings.catch_warnings():
            # runpy warns that the module is already imported (by the tests): it runs it afresh as __main__.
            warnings.filterwarnings("ignore", message=".*found in sys.modules", category=RuntimeWarning)
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    finally:
        sys.argv = saved
    return 0


# ---------------------------------------------------------------------- metrics a run logs
def env_file_logger(tmp_path) -> str:
    path = os.path.join(str(tmp_path), "metrics.jsonl")
    os.environ["VERL_FILE_LOGGER_PATH"] = path
    return path


# ---------------------------------------------------------------------- the launch scripts
PAPER_SCRIPTS = sorted(
    os.path.basename(p)
    for p in glob.glob(os.path.join(TRAIN_SCRIPTS, "*.sh"))
    if os.path.basename(p).split("_")[0] in ("grpo", "dapo", "pc")
)
SCRIPT_ENV = (
    "MODEL_PATH",
    "DATA_DIR",
    "OUT_DIR",
    "VERL_FILE_LOGGER_PATH",
    "RAY_TMP",
    "PRESET",
    "GRADER",
    "SHOW_CONFIG",
)
# A stand-in for `python3`: the trainer's command line (and the environment it would start in) is recorded instead of
# run; any other python3 call (the arithmetic data the one-GPU scripts write) runs for real.
SHIM = """#!/bin/sh
if [ "$1" = -m ] && [ "$2" = recipe.pc.main_pc ]; then
  printf '%s\\0' "$@" > "$ARGS_OUT"
  env -0 > "$ARGS_OUT.env"
  exit 0
fi
exec {python} "$@"
"""


def script_env(env_extra: dict, drop=SCRIPT_ENV) -> dict:
    """The test process's environment without the scripts' own variables (a fit test sets VERL_FILE_LOGGER_PATH),
    the venv first on PATH, and ``env_extra``."""
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update({"PATH": VENV_PATH, **env_extra})
    return env


def run_script(script: str, env_extra: dict, *args: str, cwd=None, drop=SCRIPT_ENV):
    """Run a train script for real (python3 included). ``cwd``: where Hydra writes its run folder (outputs/)."""
    env = script_env(env_extra, drop)
    path = os.path.join(TRAIN_SCRIPTS, script)
    return subprocess.run(["bash", path, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


@dataclasses.dataclass
class ScriptCall:
    """What a launch script did up to the trainer: the trainer's Hydra overrides, whether it asked for ``--validate``
    and ``--show-config``, the environment the trainer would have started in, and the script's own stderr."""

    overrides: list
    validate: bool
    show_config: bool
    env: dict
    stderr: str


def script_call(script: str, tmp_path, *args: str, **env_extra) -> ScriptCall:
    """Run ``script`` with bash up to the trainer's command line, which ``python3`` (a stand-in) records.

    The variables of ``SCRIPT_ENV`` are unset unless given, but for two defaults that keep a script away from real
    folders: DATA_DIR=/data/pc for a paper script (not the user's ~/data), OUT_DIR=``tmp_path``/out (not the
    repository's outputs/; a one-GPU script writes its arithmetic data there when DATA_DIR is unset).
    """
    shim_dir = tmp_path / "bin"
    shim_dir.mkdir(exist_ok=True)
    shim = shim_dir / "python3"
    shim.write_text(SHIM.format(python=sys.executable))
    shim.chmod(0o755)
    out = tmp_path / f"{script}.args"
    out.unlink(missing_ok=True)
    defaults = {"OUT_DIR": str(tmp_path / "out"), **({"DATA_DIR": "/data/pc"} if script in PAPER_SCRIPTS else {})}
    env = script_env({**defaults, "ARGS_OUT": str(out), **env_extra})
    env["PATH"] = f"{shim_dir}{os.pathsep}{env['PATH']}"
    run = subprocess.run(
        ["bash", os.path.join(TRAIN_SCRIPTS, script), *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert out.exists(), f"{script} never started the trainer: {run.stderr[-2000:]}"
    argv = out.read_text().split("\0")[:-1]
    assert argv[:2] == ["-m", "recipe.pc.main_pc"], argv[:2]
    recorded = dict(line.split("=", 1) for line in (tmp_path / f"{script}.args.env").read_text().split("\0") if line)
    flags = ("--validate", "--show-config")
    overrides = [a for a in argv[2:] if a not in flags]
    return ScriptCall(overrides, flags[0] in argv, flags[1] in argv, recorded, run.stderr)


def script_command_line(script: str, tmp_path, *args: str, **env_extra) -> list[str]:
    """The Hydra overrides ``script`` hands to ``python3 -m recipe.pc.main_pc`` (see ``script_call``)."""
    return script_call(script, tmp_path, *args, **env_extra).overrides


@contextlib.contextmanager
def environment(env: dict):
    """``os.environ`` is ``env`` inside the block (the checks read some variables the launchers export)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@dataclasses.dataclass
class DryRun:
    """A launch script's ``DRY_RUN=1``, in-process: the composed config (unresolved, as --validate prints it), the
    start-up checks' problems and notes, and the script's stderr."""

    config: object
    problems: list
    notes: list
    stderr: str

    def resolved(self):
        from omegaconf import OmegaConf

        config = self.config.copy()
        OmegaConf.resolve(config)
        return config


def dry_run(script: str, tmp_path, *args: str, **env_extra) -> DryRun:
    """What ``DRY_RUN=1 bash train_scripts/<script> ARGS`` checks, without its Python process: bash runs the script up
    to the trainer's command line (``script_call``); that command line is composed here and run through
    ``startup_checks.preflight(fetch_model=False)`` in the environment the trainer would have had, as ``--validate``
    does."""
    from recipe.pc.startup_checks import preflight
    from recipe.pc.testing import compose_pc_config

    call = script_call(script, tmp_path, *args, DRY_RUN="1", **env_extra)
    assert call.validate, f"{script} with DRY_RUN=1 did not ask the trainer to --validate"
    config = compose_pc_config(call.overrides)
    with environment(call.env):
        problems, notes = preflight(config, fetch_model=False)
    return DryRun(config, problems, notes, call.stderr)


@dataclasses.dataclass
class Printed:
    """What a dry run printed: its exit status, stdout and stderr."""

    code: int
    out: str
    err: str

    def errors(self) -> list[str]:
        return [
            line.removeprefix("config error: ") for line in self.err.splitlines() if line.startswith("config error: ")
        ]


def validate_script(script: str, tmp_path, *args: str, **env_extra) -> Printed:
    """What ``DRY_RUN=1 bash train_scripts/<script> ARGS`` prints, without its Python process: bash runs the script up
    to the trainer's command line (``script_call``); that command line is composed here and goes through
    ``main_pc.dry_run`` (what ``--validate`` runs, ``--show-config`` as the script asked) in the environment the
    trainer would have had."""
    import io

    from recipe.pc import main_pc
    from recipe.pc.testing import compose_pc_config

    call = script_call(script, tmp_path, *args, DRY_RUN="1", **env_extra)
    assert call.validate, f"{script} with DRY_RUN=1 did not ask the trainer to --validate"
    config = compose_pc_config(call.overrides)
    out, err, code = io.StringIO(), io.StringIO(), 0
    with environment(call.env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main_pc.dry_run(config, show_config=call.show_config)
        except SystemExit as exit_:
            code = exit_.code
    return Printed(code, out.getvalue(), err.getvalue())


def write_parquet_rows(path, rows: int = 512) -> None:
    """A parquet file of ``rows`` rows: the start-up checks read its footer (readable, enough rows for a generation
    batch), never a row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    pq.write_table(pa.table({"index": list(range(rows))}), str(path))


def stand_in_data_dir(root) -> str:
    """Every parquet a train script names under $DATA_DIR, as small readable files, both presets' folders included."""
    parquets = {"train.parquet", "test.parquet"}
    for script in glob.glob(os.path.join(TRAIN_SCRIPTS, "*.sh")):
        with open(script) as f:
            parquets.update(re.findall(r"\$DATA_DIR/([\w./-]+\.parquet)", f.read()))
    # common.sh picks the DeepMath folder by preset ($DATA_DIR/$DEEPMATH_DIR/...): each copy's splits.
    for folder in ("deepmath_103k_prefiltered", "deepmath_103k_filtered", "deepmath_103k_prefiltered_as_authors"):
        parquets.update({f"{folder}/train.parquet", f"{folder}/test.parquet"})
    for name in parquets:
        write_parquet_rows(os.path.join(str(root), name))
    return str(root)


def stand_in_model(folder) -> str:
    """A local model folder as the start-up checks want it: config.json, weights and a tokenizer (all empty)."""
    os.makedirs(str(folder), exist_ok=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        open(os.path.join(str(folder), name), "w").close()
    return str(folder)


def wait_until(condition, what: str, timeout: float = 120.0):
    """Poll ``condition`` until it holds (returning its value) or ``timeout`` s pass: a loaded machine is slow,
    not wrong, so the deadline is generous and only a condition that never comes fails."""
    import time

    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"after {timeout} s: {what}"
        time.sleep(0.2)
    return value


def valid_overrides(train: str, test: str, model_folder) -> list[str]:
    """Overrides of a config that passes every start-up check on CPU: 4 GPUs, dynamic batch sizes, the math reward,
    over the given parquets and a stand-in model written in ``model_folder``."""
    return [
        f"data.train_files={train}",
        f"data.val_files=[{test}]",
        f"actor_rollout_ref.model.path={stand_in_model(model_folder)}",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.actor.use_dynamic_bsz=true",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "data.train_batch_size=8",
        "trainer.n_gpus_per_node=4",
        "reward.custom_reward_function.path=pkg://recipe.pc.rewards.math_reward",
        "reward.custom_reward_function.name=compute_score",
        "+reward.custom_reward_function.reward_kwargs.grader=math_dapo",
    ]


# ---------------------------------------------------------------------- the data processors (data/process_*.py)
DATA_FIXTURES = os.path.join(FIXTURES, "data")
DEEPMATH_ROWS = [
    {"question": "What is 2+2", "final_answer": "4", "difficulty": 3.0},  # gets a period
    {"question": "Is 7 prime?", "final_answer": "Yes", "difficulty": 2.0},  # binary
    {"question": "Compute 3*3.", "final_answer": "9", "difficulty": 5.5},
    {"question": "", "final_answer": "1", "difficulty": 1.0},  # empty problem
    {"question": "Find x:", "final_answer": None, "difficulty": 4.0},  # missing answer
    {"question": "What is 2+2", "final_answer": "4", "difficulty": 3.0},  # duplicate text
    {"question": "Is 2 even?", "final_answer": "$\\text{False}$", "difficulty": 2.0},  # binary, wrapped
    {"question": "Is 1 < 2?", "final_answer": "\\textbf{TRUE}.", "difficulty": 2.0},  # binary, wrapped
    {"question": "Solve x^2 = -1 over R", "final_answer": "No solution", "difficulty": 6.0},
    {"question": "Give a prime!", "final_answer": "2", "difficulty": 1.5},
    {"question": "Let n = 5:", "final_answer": "5", "difficulty": 2.5},
    {"question": "What is 10/2?", "final_answer": "5", "difficulty": 2.0},
    {"question": "What is 6*7?", "final_answer": "42", "difficulty": 2.0},
    {"question": "  What is 1-1?  ", "final_answer": "0", "difficulty": 9.0},
]


def fixture(name):
    return os.path.join(DATA_FIXTURES, name)


def write_parquet(path, rows):
    import pandas as pd

    pd.DataFrame(rows).to_parquet(path, index=False)
    return str(path)


def write_jsonl(path, rows):

    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def read_rows(path):
    import pandas as pd

    return pd.read_parquet(path).to_dict("records")


def plain_rows(path):
    """The file's rows as plain Python values (lists and dicts, not numpy arrays)."""
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def clean_env(**extra) -> dict:
    """This environment for a launcher subprocess, without the variables a launcher reads, and ``extra``."""
    drop = ("MODEL_PATH", "DATA_DIR", "OUT_DIR", "VERL_FILE_LOGGER_PATH", "RAY_TMP", "RAY_ADDRESS", "PRESET", "GRADER")
    env = {k: v for k, v in os.environ.items() if k not in drop + ("TRAINER_CMD", "DRY_RUN", "SHOW_CONFIG")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
    return {**env, **extra}
