"""Entry point: ``python -m recipe.pc.main_pc [--validate] <hydra overrides>``.

Composes ``config/pc_trainer.yaml`` over verl's packaged ``ppo_trainer`` and runs verl's
``run_ppo`` with a TaskRunner that builds RayPCTrainer (whose allocator ``algorithm.rollout_allocation``
picks: ``pilot_commit``, ``grpo`` or ``dapo``) on the legacy (non-V1) path, whatever ``trainer.use_v1`` says.

Before Ray starts it runs every start-up check that needs no GPU (``preflight``). ``--validate``
prints the composed config (as ``--cfg job`` does), runs those checks without fetching the model,
and exits non-zero naming each failure.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import logging
import os
import re
import socket
import sys

import hydra
import ray
from omegaconf import OmegaConf
from verl.trainer.main_ppo import run_ppo
from verl.trainer.main_ppo_v0 import BaseTaskRunner
from verl.utils.device import auto_set_device

from recipe.pc import reference_loss
from recipe.pc.parallel import check_parallel_sizes, micro_batches
from recipe.pc.settings import PCSettings

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

# A hub id is "owner/name"; anything starting like a path is a local folder.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
HUB_TIMEOUT_S = 10


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


# ---------------------------------------------------------------------- start-up checks (no GPU)
def actor_dp_size(config, role: str = "actor") -> int:
    """Data-parallel ranks of the actor (or ``role``: ref), as verl's workers compute them from the cluster size."""
    actor = config.actor_rollout_ref[role]
    world = int(config.trainer.nnodes) * int(config.trainer.n_gpus_per_node)
    if actor.strategy == "megatron":
        model_parallel = (
            actor.megatron.tensor_model_parallel_size
            * actor.megatron.pipeline_model_parallel_size
            * actor.megatron.context_parallel_size
        )
        what = f"actor_rollout_ref.{role}.megatron tensor x pipeline x context parallel sizes"
    else:
        model_parallel = actor.get("ulysses_sequence_parallel_size", 1)
        what = f"actor_rollout_ref.{role}.ulysses_sequence_parallel_size"
    if world < 1 or model_parallel < 1:
        raise ValueError(
            f"trainer.nnodes * trainer.n_gpus_per_node = {world} GPUs and {what} = {model_parallel} must be positive"
        )
    if world % model_parallel:
        raise ValueError(
            f"trainer.nnodes * trainer.n_gpus_per_node = {world} GPUs do not split into groups of {what} = "
            f"{model_parallel}"
        )
    return world // model_parallel


def reference_dp_size(config) -> int | None:
    """Ranks of a separate reference model, or None: no reference, or (LoRA) the actor without its adapter."""
    from verl.trainer.ppo.utils import need_reference_policy

    model = config.actor_rollout_ref.model
    lora_rank = (model.get("lora") or {}).get("rank", 0) or model.get("lora_rank", 0)
    if not need_reference_policy(config) or lora_rank > 0 or model.get("lora_adapter_path") is not None:
        return None
    return actor_dp_size(config, "ref")


def _check_pc(config) -> None:
    settings = PCSettings.from_config(config)
    dp_size = actor_dp_size(config)
    # Null sizes are left to verl's validate_config (_check_verl), which names them.
    micro = micro_batches(config, dp_size, reference_dp_size(config))
    check_parallel_sizes(settings, dp_size, int(config.actor_rollout_ref.actor.ppo_mini_batch_size), micro)


def _check_verl(config) -> None:
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    omega_conf_to_dataclass(config.actor_rollout_ref.rollout)  # the rollout config's own dataclass checks


def _check_reward(config) -> None:
    from verl.utils.import_utils import load_extern_object

    spec = config.reward.get("custom_reward_function") or {}
    if not spec.get("path"):
        return
    try:
        fn = load_extern_object(module_path=spec.path, object_name=spec.name)
    except Exception as err:
        raise ValueError(f"reward.custom_reward_function: cannot load {spec.name!r} from {spec.path!r}: {err}") from err
    kwargs = dict(spec.get("reward_kwargs") or {})
    params = inspect.signature(fn).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(kwargs) - set(params))
        if unknown:
            raise ValueError(
                f"reward.custom_reward_function.reward_kwargs has {unknown}, which {spec.name} does not take"
            )
    # A reward module that offers several graders lists them in GRADERS (see rewards/math_reward.py).
    graders = getattr(sys.modules.get(fn.__module__), "GRADERS", None)
    if graders is not None and "grader" in kwargs and kwargs["grader"] not in graders:
        raise ValueError(
            f"reward.custom_reward_function.reward_kwargs.grader={kwargs['grader']!r} (GRADER in the scripts): "
            f"choose one of {tuple(graders)}"
        )


def _check_data_files(config) -> None:
    missing = []
    for key in ("data.train_files", "data.val_files"):
        files = OmegaConf.select(config, key)
        for path in [files] if isinstance(files, str) else list(files or []):
            if "://" not in str(path) and not os.path.exists(os.path.expanduser(path)):
                missing.append(f"{key}: {path}")
    if missing:
        raise FileNotFoundError("data files not found: " + "; ".join(missing))


def hub_model_problem(repo_id: str) -> str | None:
    """None when ``repo_id`` is in the local Hugging Face cache or the hub answers for it; else why not."""
    from huggingface_hub import model_info, snapshot_download

    try:
        snapshot_download(repo_id, local_files_only=True)
        return None
    except Exception:
        pass  # not cached: ask the hub
    try:
        model_info(repo_id, timeout=HUB_TIMEOUT_S)
        return None
    except Exception as err:
        return (
            f"model {repo_id!r} is not in the local Hugging Face cache and cannot be fetched from the hub "
            f"({type(err).__name__}); download it where there is network (hf download {repo_id} --local-dir DIR) "
            "and set MODEL_PATH=DIR (or actor_rollout_ref.model.path=DIR)"
        )


def _check_model(config, fetch: bool) -> str | None:
    """Raise when the model cannot be used; return a note when it was not checked."""
    path = str(config.actor_rollout_ref.model.path)
    if os.path.exists(os.path.expanduser(path)) or "://" in path:
        return None
    if not _HUB_ID.match(path):
        raise FileNotFoundError(f"actor_rollout_ref.model.path={path} (MODEL_PATH) does not exist")
    if not fetch:
        return f"actor_rollout_ref.model.path={path} is a hub id: not checked in a dry run (fetched at launch)"
    problem = hub_model_problem(path)
    if problem:
        raise FileNotFoundError(problem)
    return None


def preflight(config, fetch_model: bool) -> tuple[list[str], list[str]]:
    """Every start-up check that needs no GPU. Returns (problems, notes); each problem names its key."""
    config = copy.deepcopy(config)
    OmegaConf.resolve(config)
    problems, notes = [], []
    checks = (_check_pc, _check_verl, _check_reward, _check_data_files, lambda c: _check_model(c, fetch_model))
    for check in checks:
        try:
            note = check(config)
        except Exception as err:  # each check reports its own failure; the rest still run
            problems.append(str(err).strip() or type(err).__name__)
        else:
            if note:
                notes.append(note)
    return problems, notes


def _report_and_exit_on_problems(config, fetch_model: bool) -> None:
    # verl's checks print to stdout; keep stdout for the config that --validate prints.
    with contextlib.redirect_stdout(sys.stderr):
        problems, notes = preflight(config, fetch_model)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
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


@hydra.main(config_path="config", config_name="pc_trainer", version_base=None)
def main(config):
    auto_set_device(config)
    _report_and_exit_on_problems(config, fetch_model=True)  # fail here, before Ray and the workers start
    forward_driver_env(config)
    register_external_modules(config)
    run_ppo(config, task_runner_class=PCTaskRunner)


@hydra.main(config_path="config", config_name="pc_trainer", version_base=None)
def validate(config):
    print(OmegaConf.to_yaml(config), end="")
    _report_and_exit_on_problems(config, fetch_model=False)
    print("config checks passed", file=sys.stderr)


if __name__ == "__main__":
    if "--validate" in sys.argv:
        sys.argv.remove("--validate")
        validate()
    else:
        main()
