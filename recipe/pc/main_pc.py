"""Entry point: ``python -m recipe.pc.main_pc [--validate [--show-config]] <hydra overrides>``.

Composes ``config/pc_trainer.yaml`` over verl's packaged ``ppo_trainer`` and runs verl's
``run_ppo`` with a TaskRunner that builds RayPCTrainer (whose allocator ``algorithm.rollout_allocation``
picks: ``pilot_commit``, ``grpo``, ``dapo`` or ``knapsack``) on the legacy (non-V1) path, whatever ``trainer.use_v1``
says.

A misspelt key stops the entry point before Hydra composes, naming the closest real key. Before Ray starts it runs
every start-up check that needs no GPU (``recipe.pc.startup_checks``), and on a launch that starts its own Ray it
counts this machine's GPUs. ``--validate`` runs those checks without fetching the model or counting GPUs and exits
non-zero naming each failure; once they pass it prints what the run will do (``recipe.pc.dry_run.summary``).
``--show-config`` also prints the composed config first (as ``--cfg job`` does). Both warn, one line a data file,
about rows whose ground truth is empty, missing or not a string (``ground_truth_warnings``): they are graded, never
stop a run. verl's known start-up warnings are filtered (``recipe.pc.known_warnings``).
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
import re
import socket
import sys

import hydra
import ray
from omegaconf import OmegaConf

from recipe.pc.known_warnings import filter_known_warnings

filter_known_warnings()  # before verl is imported: it warns while importing (E402 is off for this file)

from verl.trainer.main_ppo import run_ppo
from verl.trainer.main_ppo_v0 import BaseTaskRunner
from verl.utils.device import auto_set_device

import recipe.pc.allocators  # noqa: F401  (registered before Hydra composes: their key groups join the config)
import recipe.pc.stages  # noqa: F401
from recipe.pc import reference_loss
from recipe.pc.dry_run import pass_share_from, summary
from recipe.pc.startup_checks import ground_truth_warnings, preflight

# Variables the launchers set for the processes inside Ray. A Ray instance started by the driver inherits them;
# on a cluster started beforehand (train_scripts/ray_cluster.sh, any `ray start`) the TaskRunner and workers do
# not, so verl's file logger wrote to its default path in the first two-node GPU run.
FORWARDED_ENV = (
    "VERL_FILE_LOGGER_PATH",
    "VERL_FILE_LOGGER_ROOT",
    "TENSORBOARD_DIR",
    "WANDB_MODE",
    "WANDB_DIR",
    "PC_LOGGING_LEVEL",
)

CONFIG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config")
CONFIG_NAME = "pc_trainer"


@ray.remote(num_cpus=1)
class PCTaskRunner(BaseTaskRunner):
    """Builds workers, datasets and RayPCTrainer inside the Ray cluster, then trains."""

    def run(self, config):
        from verl.trainer.ppo.utils import create_rl_dataset, create_rl_sampler, need_critic, need_reference_policy
        from verl.utils.config import omega_conf_to_dataclass, validate_config
        from verl.utils.dataset.rl_dataset import collate_fn
        from verl.workers.config import HFModelConfig

        from recipe.pc.pc_ray_trainer import RayPCTrainer

        configure_pc_logging()
        print(f"PCTaskRunner on {socket.gethostname()}, pid {os.getpid()}")
        OmegaConf.resolve(config)
        _, ray_worker_group_cls = self.add_actor_rollout_worker(config)
        self.add_critic_worker(config)
        self.add_reward_model_resource_pool(config)
        self.add_teacher_model_resource_pool(config)
        validate_config(
            config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
        )

        model_config: HFModelConfig = omega_conf_to_dataclass(config.actor_rollout_ref.model)
        tokenizer, processor = model_config.tokenizer, model_config.processor
        resource_pool_manager = self.init_resource_pool_mgr(config)
        train_dataset = create_rl_dataset(
            config.data.train_files,
            config.data,
            tokenizer,
            processor,
            is_train=True,
            max_samples=config.data.get("train_max_samples", -1),
        )
        val_dataset = create_rl_dataset(
            config.data.val_files,
            config.data,
            tokenizer,
            processor,
            is_train=False,
            max_samples=config.data.get("val_max_samples", -1),
        )
        trainer = RayPCTrainer(
            config=config,
            tokenizer=tokenizer,
            processor=processor,
            role_worker_mapping=self.role_worker_mapping,
            resource_pool_manager=resource_pool_manager,
            ray_worker_group_cls=ray_worker_group_cls,
            train_dataset=train_dataset,
            val_dataset=val_dataset,
            collate_fn=collate_fn,
            train_sampler=create_rl_sampler(config.data, train_dataset),
        )
        trainer.init_workers()
        trainer.fit()


def _report_and_exit_on_problems(config, fetch_model: bool) -> None:
    # verl's checks print to stdout; keep stdout for what --validate prints.
    with contextlib.redirect_stdout(sys.stderr):
        problems, notes = preflight(config, fetch_model)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    for warning in ground_truth_warnings(config):
        print(f"warning: {warning}", file=sys.stderr)
    for problem in problems:
        print(f"config error: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)


def configure_pc_logging(stream=None) -> logging.Logger:
    """Print the recipe's log lines (e.g. the PC state saved and resumed) inside the TaskRunner.

    A Ray actor has no logging handler, so only warnings reached the console before. Level:
    ``PC_LOGGING_LEVEL`` (default INFO). Calling it again changes nothing but the level.
    """
    log = logging.getLogger("recipe.pc")
    if not any(getattr(h, "pc_handler", False) for h in log.handlers):
        handler = logging.StreamHandler(stream or sys.stdout)
        handler.pc_handler = True
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
    level = os.getenv("PC_LOGGING_LEVEL", "INFO").upper()
    if not isinstance(logging.getLevelName(level), int):
        log.setLevel(logging.INFO)
        log.warning("PC_LOGGING_LEVEL=%s is not a logging level (DEBUG, INFO, WARNING, ERROR); using INFO", level)
    else:
        log.setLevel(level)
    log.propagate = False
    return log


def forward_driver_env(config, environ=os.environ) -> list[str]:
    """Put the ``FORWARDED_ENV`` variables set here into ``ray_kwargs.ray_init.runtime_env.env_vars``.

    verl's ``run_ppo`` merges that node into the job's runtime env, which reaches every process of the job
    on every node. A value already given in the config wins. Returns the names added.
    """
    given = OmegaConf.select(config, "ray_kwargs.ray_init.runtime_env.env_vars", default=None) or {}
    added = []
    for name in FORWARDED_ENV:
        if name in environ and name not in given:
            OmegaConf.update(config, f"ray_kwargs.ray_init.runtime_env.env_vars.{name}", environ[name], force_add=True)
            added.append(name)
    return added


def register_external_modules(config, environ=os.environ) -> str:
    """Have verl import the reference loss in every process of the job (it reads ``VERL_USE_EXTERNAL_MODULES`` when
    it is imported), so the actor workers know ``policy_loss.loss_mode=pc_reference``; other modules named there,
    in the config or the environment, are kept. Returns the value set."""
    key = "ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES"
    given = OmegaConf.select(config, key, default=None) or environ.get("VERL_USE_EXTERNAL_MODULES", "")
    modules = [name for name in str(given).split(",") if name]
    if reference_loss.MODULE not in modules:
        modules.append(reference_loss.MODULE)
    OmegaConf.update(config, key, ",".join(modules), force_add=True)
    return ",".join(modules)


@hydra.main(config_path="config", config_name=CONFIG_NAME, version_base=None)
def main(config):
    # Checked before auto_set_device, which turns an explicit trainer.device=cpu into the detected accelerator.
    _report_and_exit_on_problems(config, fetch_model=True)  # fail here, before Ray and the workers start
    auto_set_device(config)
    forward_driver_env(config)
    register_external_modules(config)
    run_ppo(config, task_runner_class=PCTaskRunner)


def dry_run(config, show_config: bool = False) -> None:
    """``--validate``: the composed config if asked for, the start-up checks (exit 1 on a problem), then the summary of
    what the run will do, on stdout."""
    try:
        pass_share_from(os.environ)
    except ValueError as err:
        print(f"config error: {err}", file=sys.stderr)
        sys.exit(1)
    if show_config:
        print(OmegaConf.to_yaml(config), end="")
    _report_and_exit_on_problems(config, fetch_model=False)
    print("config checks passed", file=sys.stderr)
    print("\n".join(summary(config)))


@hydra.main(config_path="config", config_name=CONFIG_NAME, version_base=None)
def validate(config):
    dry_run(config)


@hydra.main(config_path="config", config_name=CONFIG_NAME, version_base=None)
def validate_and_show_config(config):
    dry_run(config, show_config=True)


# ---------------------------------------------------------------------- keys the config does not have
def _config_keys(node, prefix: str = "") -> list[str]:
    """Every dotted key of a composed config, nodes included; list items are not keys."""
    keys = []
    for name, value in node.items_ex(resolve=False):
        keys.append(prefix + str(name))
        if OmegaConf.is_dict(value):
            keys += _config_keys(value, f"{prefix}{name}.")
    return keys


# Nodes whose keys are free: what they hold is passed on as keyword arguments or variables, so +key=value adds one.
OPEN_NODES = ("override_config", "ray_init", "runtime_env", "env_vars")


def _override_key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def _may_add(config, key: str) -> bool:
    """Whether ``+key=value`` adds to a node that takes any key: one named ``*kwargs`` or in ``OPEN_NODES``, or one
    empty by default; not to a group with a fixed set of keys (the top level included), where it is a typo that
    nothing would read."""
    parts = key.split(".")
    if any(p.endswith("kwargs") or p in OPEN_NODES for p in parts[:-1]):
        return True
    for depth in range(len(parts) - 1, 0, -1):  # the nearest node the config has
        node = OmegaConf.select(config, ".".join(parts[:depth]), default=None)
        if node is not None:
            return OmegaConf.is_dict(node) and len(node) == 0  # an empty node is open; a group with keys is not
    return False


def unknown_key_problems(overrides: list[str]) -> list[str]:
    """For each override of a key that the composed config lacks, a line naming the closest real key.

    Hydra's own message advises ``+key=value``, which would add the misspelt key and train without the intended
    setting; so ``+key=value`` itself is refused the same way where it adds to a group whose keys are fixed
    (``_may_add``). Composes the config once more, twice with ``+`` overrides (a fraction of a second each); other
    composition errors are left to Hydra.
    """
    from hydra import compose, initialize_config_dir
    from hydra.errors import ConfigCompositionException

    problems, left = [], list(overrides)
    while True:
        try:
            with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
                config = compose(config_name=CONFIG_NAME, overrides=left)
            break
        except ConfigCompositionException as err:
            failed = re.match(r"Could not override '([^']+)'", str(err))
            if failed is None or getattr(err.__cause__, "full_key", None) is None:
                return problems  # not an unknown key: Hydra's own composition reports it next
            key = failed.group(1)
            problems.append(key)
            left = [o for o in left if _override_key(o) != key]
        except Exception:  # a malformed override, a missing config file: Hydra's own composition reports it next
            return problems
    plus = [o for o in left if o.startswith("+") and not o.startswith("++")]
    added = [_override_key(o) for o in plus]
    if added:  # judged against the config without them: what each would add to
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
            config = compose(config_name=CONFIG_NAME, overrides=[o for o in left if o not in plus])
        problems += [key for key in added if not _may_add(config, key)]
    if not problems:
        return []
    # Config groups (preset=...) are overridden like keys, so they are candidates too.
    known = _config_keys(config) + [d for d in os.listdir(CONFIG_DIR) if os.path.isdir(os.path.join(CONFIG_DIR, d))]
    lines = []
    for key in problems:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        if close:
            lines.append(f"{'+' if key in added else ''}{key} is not a config key: did you mean {close[0]}?")
        elif key in added:
            lines.append(f"+{key} adds a key to a group whose keys are fixed, so nothing would read it (nothing close)")
        else:
            lines.append(
                f"{key} is not a config key (nothing close); a key the config does not have is added with +{key}=VALUE"
            )
    return lines


USAGE = (
    "usage: python -m recipe.pc.main_pc [--validate [--show-config]] KEY=VALUE ...\n"
    "  --validate     run every start-up check that needs no GPU (no model download, no Ray), then print what the run\n"
    "                 will do (GPUs, rollouts, validation, checkpoints and their disk, logs) and exit: 0 when the run\n"
    "                 would start, 1 with one 'config error:' line per problem\n"
    "  --show-config  with --validate: print the composed config first\n"
    "Hydra's own help follows.\n"
)


def entry(argv: list[str] | None = None) -> None:
    """``python -m recipe.pc.main_pc [--validate [--show-config]] OVERRIDES``. A misspelt key stops here with one line
    naming the closest real key, before Hydra's own composition."""
    from hydra._internal.utils import get_args_parser

    argv = sys.argv[1:] if argv is None else argv
    checking, show_config = "--validate" in argv, "--show-config" in argv
    argv = [a for a in argv if a not in ("--validate", "--show-config")]
    if show_config and not checking:
        print(
            "config error: --show-config goes with --validate (DRY_RUN=1 SHOW_CONFIG=1 in the scripts)", file=sys.stderr
        )
        sys.exit(1)
    if checking:
        print(
            "pilot-commit dry run: composing the config and running the start-up checks (no GPU, no model download)",
            file=sys.stderr,
        )
    args = get_args_parser().parse_args(argv)
    if args.help:  # Hydra's help knows nothing of --validate and --show-config: say them first
        print(USAGE)
    # Hydra's own modes (help, info, another config, sweeps) compose differently: they keep Hydra's messages.
    own_modes = (args.help, args.hydra_help, args.info, args.shell_completion, args.experimental_rerun, args.multirun)
    if not (any(own_modes) or args.config_path or args.config_name or args.config_dir):
        problems = unknown_key_problems(args.overrides)
        for problem in problems:
            print(f"config error: {problem}", file=sys.stderr)
        if problems:
            sys.exit(1)
    sys.argv = [sys.argv[0], *argv]
    (validate_and_show_config if show_config else validate if checking else main)()


if __name__ == "__main__":
    entry()
