"""The start-up checks that need no GPU, run before Ray starts (``python -m recipe.pc.main_pc`` and its
``--validate``): each names the key or file to fix. ``preflight`` runs them all."""

from __future__ import annotations

import copy
import glob
import importlib.util
import inspect
import math
import os
import re
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from omegaconf import OmegaConf
from verl.utils.device import get_platform

from recipe.pc.errors import PCConfigError, PCConfigErrors, problems_of
from recipe.pc.parallel import check_parallel_sizes, micro_batches
from recipe.pc.settings import PCSettings
from recipe.pc.stages.prompt_filter import prompt_filter_class

# A hub id is "owner/name"; anything starting like a path is a local folder.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
HUB_TIMEOUT_S = 10
# What verl loads from a local model folder besides config.json: weights, and a tokenizer's vocabulary in one of the
# forms transformers reads.
WEIGHT_FILES = ("*.safetensors", "pytorch_model*.bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")

PARALLEL_NOT_CHECKED = (
    "not checked: how a step's rows split over the data-parallel ranks, mini-batches and micro-batches, until the "
    "settings above are fixed"
)
DATA_KEYS = ("data.train_files", "data.val_files")
# The sizes whose product is one rollout engine's GPUs (verl's RolloutConfig).
ROLLOUT_PARALLEL_KEYS = ("tensor_model_parallel_size", "data_parallel_size", "pipeline_model_parallel_size")
DATA_SUFFIXES = (".parquet", ".json", ".jsonl")  # what verl's RLHFDataset reads
# How the launcher's data files are made (train_scripts/common*.sh set it), appended to the missing-data error.
DATA_HINT_ENV = "PC_DATA_HINT"


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
    try:
        settings = PCSettings.from_config(config)
    except PCConfigError as err:
        raise PCConfigErrors([*problems_of(err), PARALLEL_NOT_CHECKED]) from None
    prompt_filter_class(settings.prompt_filter_name)
    dp_size = actor_dp_size(config)
    # Null sizes are left to verl's validate_config (_check_verl), which names them.
    micro = micro_batches(config, dp_size, reference_dp_size(config))
    check_parallel_sizes(settings, dp_size, int(config.actor_rollout_ref.actor.ppo_mini_batch_size), micro)


def _check_rollout_parallel(config) -> None:
    """The GPUs of one rollout engine (tensor x data x pipeline parallel) must tile the cluster: verl asserts it only
    once the workers start (verl 0.9.1's ``engine_workers.ActorRolloutRefWorker.init_model``: the world size divisible
    by the engine's; ``rollout/replica.py`` ``RolloutReplica.__init__``: an engine spans whole nodes or fits in one)."""
    rollout = config.actor_rollout_ref.rollout
    sizes = {key: rollout.get(key, 1) for key in ROLLOUT_PARALLEL_KEYS}
    if any(not isinstance(size, int) or size < 1 for size in sizes.values()):
        return  # verl's RolloutConfig names a bad size (_check_verl)
    engine = math.prod(sizes.values())
    per_node = int(config.trainer.n_gpus_per_node)
    world = int(config.trainer.nnodes) * per_node
    if world < 1 or (world % engine == 0 and engine % min(per_node, engine) == 0):
        return
    product = " × ".join(f"{key} {size}" for key, size in sizes.items())
    fits = [n for n in range(1, engine) if world % n == 0 and n % min(per_node, n) == 0]
    raise ValueError(
        f"actor_rollout_ref.rollout: a rollout engine takes {product} = {engine} GPUs, which do not tile "
        f"trainer.nnodes × trainer.n_gpus_per_node = {world} ({per_node} a node): set "
        f"actor_rollout_ref.rollout.tensor_model_parallel_size so the product is {' or '.join(map(str, fits))}"
    )


def _check_trainer(config) -> str | None:
    """The trainer path and the loggers: refused here, before Ray, what verl would refuse or ignore only after the
    model and the rollout engine have loaded. A note when W&B is asked for but switched off."""
    from verl.utils.tracking import Tracking

    problems = []
    if OmegaConf.select(config, "trainer.use_v1", default=False):
        problems.append(
            "trainer.use_v1=true asks for verl's V1 trainer, but RayPCTrainer replaces the fit() of verl's legacy "
            "trainer (RayPPOTrainer) and runs on that path only: set trainer.use_v1=false"
        )
    loggers = OmegaConf.select(config, "trainer.logger", default=["console"])
    loggers = [loggers] if isinstance(loggers, str) else list(loggers or [])
    known = [*Tracking.supported_backend, "tracking"]  # verl still accepts its deprecated "tracking" name
    unknown = [name for name in loggers if name not in known]
    if unknown:
        problems.append(f"trainer.logger has {unknown}, which verl does not have; choose from {known}")
    if problems:
        raise PCConfigErrors(problems)
    if "wandb" in loggers and os.environ.get("WANDB_MODE") == "disabled":
        return (
            "trainer.logger has wandb but WANDB_MODE=disabled (the one-GPU scripts set it), so W&B will log nothing: "
            "export WANDB_MODE=online (or offline) first"
        )
    return None


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
    # A reward module that offers several graders lists them in GRADERS, and what each imports in GRADER_PACKAGES
    # (see rewards/math_reward.py): a missing package would only show when the first batch is graded.
    module = sys.modules.get(fn.__module__)
    graders = getattr(module, "GRADERS", None)
    if graders is None:
        return
    if "grader" in kwargs and kwargs["grader"] not in graders:
        raise ValueError(
            f"reward.custom_reward_function.reward_kwargs.grader={kwargs['grader']!r} (GRADER in the scripts): "
            f"choose one of {tuple(graders)}"
        )
    grader = kwargs.get("grader", params["grader"].default if "grader" in params else None)
    missing = [dist for name, dist in getattr(module, "GRADER_PACKAGES", {}).get(grader, ()) if not _importable(name)]
    if missing:
        raise ValueError(
            f"reward.custom_reward_function.reward_kwargs.grader={grader} (GRADER in the scripts) needs "
            f"{' and '.join(missing)}, not installed for {sys.executable}: pip install -e '.[math]' "
            "(GRADER=math_dapo needs no extra package)"
        )


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _data_paths(config, key: str) -> list[str]:
    files = OmegaConf.select(config, key)
    return [str(path) for path in ([files] if isinstance(files, str) else list(files or []))]


def _check_data_files(config) -> None:
    missing = []
    for key in DATA_KEYS:
        for path in _data_paths(config, key):
            if "://" not in path and not os.path.exists(os.path.expanduser(path)):
                missing.append(f"{key}: {path}")
    if missing:
        hint = os.environ.get(DATA_HINT_ENV)
        raise FileNotFoundError("data files not found: " + "; ".join(missing) + (f"; {hint}" if hint else ""))


def train_rows(config) -> tuple[int, int] | None:
    """(rows of the train files, the rows verl loads: ``data.train_max_samples`` applied), read from parquet footers:
    no row is loaded. None when a train file is remote, missing, not a parquet or unreadable (the dataset loader names
    it at launch)."""
    counts = []
    for path in _data_paths(config, "data.train_files"):
        local = os.path.expanduser(path)
        if "://" in path or not path.endswith(".parquet") or not os.path.exists(local):
            return None
        try:
            counts.append(pq.ParquetFile(local).metadata.num_rows)
        except Exception:
            return None
    if not counts:
        return None
    rows = sum(counts)
    limit = config.data.get("train_max_samples", -1) or -1
    return rows, (min(rows, limit) if limit > 0 else rows)


def _check_data_rows(config) -> None:
    """Every local data file in a format verl reads, and at least one generation batch of train rows: the trainer
    refuses fewer, but only after the workers have started."""
    problems = []
    for key in DATA_KEYS:
        for path in _data_paths(config, key):
            if "://" not in path and os.path.exists(os.path.expanduser(path)) and not path.endswith(DATA_SUFFIXES):
                problems.append(f"{key}: {path} is not a {', '.join(DATA_SUFFIXES)} file, the formats verl reads")
    if problems:
        raise ValueError("; ".join(problems))
    counted = train_rows(config)
    if counted is None:
        return
    rows, usable = counted
    limit = config.data.get("train_max_samples", -1) or -1
    try:
        gen_batch = PCSettings.from_config(config).gen_batch_size
    except ValueError:
        return  # _check_pc names the bad setting
    if usable < gen_batch:
        limited = f" (data.train_max_samples={limit} of {rows})" if usable < rows else ""
        raise ValueError(
            f"data.train_files ({', '.join(_data_paths(config, 'data.train_files'))}) have {usable} rows{limited}, "
            "fewer than one generation batch "
            f"(data.gen_batch_size={gen_batch}): use a larger train set or lower data.gen_batch_size"
        )


# ---------------------------------------------------------------------- ground truths (a warning, never a failure)
GROUND_TRUTH_ROWS_SHOWN = 5


# A row whose whole reward_model entry is null (or absent): graded as a null ground truth, counted apart.
NULL_ENTRY = object()


def ground_truth_warnings(config) -> list[str]:
    """One line per local data file with rows whose ``reward_model.ground_truth`` is empty, missing or not a string,
    or whose whole ``reward_model`` is null: how many of each, and the first few row numbers. Such a row never stops a
    run (the dataset and the rewards grade it), so it is reported, not refused. A file that cannot be read here is
    left to the dataset loader."""
    lines = []
    for key in DATA_KEYS:
        for path in _data_paths(config, key):
            local = os.path.expanduser(path)
            if "://" in path or not os.path.exists(local) or not path.endswith(DATA_SUFFIXES):
                continue
            try:
                truths = _ground_truths(local)
            except Exception:
                continue
            kinds = {"empty": [], "missing": [], "non-string": [], "null reward_model": []}
            for row, truth in enumerate(truths):
                if truth is NULL_ENTRY:
                    kinds["null reward_model"].append(row)
                elif truth is None:
                    kinds["missing"].append(row)
                elif not isinstance(truth, str):
                    kinds["non-string"].append(row)
                elif not truth.strip():
                    kinds["empty"].append(row)
            bad = sorted(row for rows in kinds.values() for row in rows)
            if not bad:
                continue
            counts = ", ".join(f"{len(rows)} {kind}" for kind, rows in kinds.items() if rows)
            more = ", ..." if len(bad) > GROUND_TRUTH_ROWS_SHOWN else ""
            shown = ", ".join(map(str, bad[:GROUND_TRUTH_ROWS_SHOWN])) + more
            lines.append(
                f"{key}: {path}: {len(bad)} of {len(truths)} rows have an empty, missing or non-string "
                f"reward_model.ground_truth or a null reward_model ({counts}; rows {shown}); they are graded, never "
                "stopping the run (docs/reference-preset.md says how), but fix the data if they are not meant to be "
                "there"
            )
    return lines


def _ground_truths(path: str) -> list:
    """Each row's ``reward_model.ground_truth`` as the dataset would give it: None where the field is missing,
    ``NULL_ENTRY`` where the whole entry is; nothing for a file without that field (the dataset loader refuses such a
    file, naming it)."""
    if path.endswith(".parquet"):
        parquet = pq.ParquetFile(path)
        if "reward_model" not in parquet.schema_arrow.names:
            return []
        column = parquet.read(columns=["reward_model"]).column("reward_model")
        if not pa.types.is_struct(column.type) or column.type.get_field_index("ground_truth") < 0:
            return []
        truths = pc.struct_field(column, "ground_truth").to_pylist()
        return [NULL_ENTRY if null else t for t, null in zip(truths, column.is_null().to_pylist(), strict=True)]
    import pandas as pd

    try:
        frame = pd.read_json(path, lines=True)
    except ValueError:  # a JSON array rather than JSON lines; verl reads both
        frame = pd.read_json(path)
    models = list(frame["reward_model"]) if "reward_model" in frame else []
    if not any(isinstance(model, dict) and "ground_truth" in model for model in models):
        return []
    return [model.get("ground_truth") if isinstance(model, dict) else NULL_ENTRY for model in models]


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
    if "://" in path:
        return None
    if os.path.exists(os.path.expanduser(path)):
        _check_model_folder(config.actor_rollout_ref.model)
        return None
    if not _HUB_ID.match(path):
        raise FileNotFoundError(f"actor_rollout_ref.model.path={path} (MODEL_PATH) does not exist")
    if not fetch:
        return f"actor_rollout_ref.model.path={path} is a hub id: not checked in a dry run (fetched at launch)"
    problem = hub_model_problem(path)
    if problem:
        raise FileNotFoundError(problem)
    return None


def _check_model_folder(model) -> None:
    """A local model folder holds what verl loads from it: Hugging Face's config.json, the weights and a tokenizer
    (from model.tokenizer_path when that is a folder of its own). Without them the TaskRunner fails inside Ray."""
    path = os.path.expanduser(str(model.path))
    if not os.path.isdir(path):
        raise FileNotFoundError(f"actor_rollout_ref.model.path={model.path} (MODEL_PATH) is a file, not a model folder")
    tokenizer_dir = os.path.expanduser(str(model.get("tokenizer_path") or model.path))
    needs_tokenizer = model.get("load_tokenizer", True)
    lacks = [] if os.path.exists(os.path.join(path, "config.json")) else ["config.json"]
    if not any(glob.glob(os.path.join(path, pattern)) for pattern in WEIGHT_FILES):
        lacks.append(f"weights ({', '.join(WEIGHT_FILES)})")
    if needs_tokenizer and tokenizer_dir == path and not _has_tokenizer(path):
        lacks.append(f"tokenizer ({', '.join(TOKENIZER_FILES)})")
    if lacks:
        raise FileNotFoundError(
            f"actor_rollout_ref.model.path={model.path} (MODEL_PATH) has no {', no '.join(lacks)}: point it at a "
            "complete Hugging Face model folder (hf download ORG/NAME --local-dir DIR)"
        )
    if needs_tokenizer and tokenizer_dir != path and os.path.isdir(tokenizer_dir) and not _has_tokenizer(tokenizer_dir):
        raise FileNotFoundError(
            f"actor_rollout_ref.model.tokenizer_path={model.tokenizer_path} has no tokenizer "
            f"({', '.join(TOKENIZER_FILES)})"
        )


def _has_tokenizer(folder: str) -> bool:
    return any(os.path.exists(os.path.join(folder, name)) for name in TOKENIZER_FILES)


def _joins_ray_cluster(config) -> bool:
    """Whether run_ppo's ``ray.init`` connects to a running cluster instead of starting one here, decided as Ray
    decides it: an address in ray_kwargs.ray_init or RAY_ADDRESS, else a cluster `ray start`ed on this machine."""
    from ray._private.services import canonicalize_bootstrap_address

    init = config.ray_kwargs.get("ray_init") or {}
    try:
        return canonicalize_bootstrap_address(init.get("address"), init.get("_temp_dir")) is not None
    except Exception:  # a private helper of Ray's that moved, or an address Ray will refuse itself: never block here
        return True


def gpu_problem(config, visible: int) -> str | None:
    """Why ``visible`` CUDA devices on this machine cannot hold the run's GPUs, or None."""
    wanted = int(config.trainer.nnodes) * int(config.trainer.n_gpus_per_node)
    if visible >= wanted:
        return None
    mask = os.environ.get("CUDA_VISIBLE_DEVICES")
    shown = f" (CUDA_VISIBLE_DEVICES={mask!r})" if mask is not None else ""
    return (
        f"the run needs trainer.nnodes * trainer.n_gpus_per_node = {wanted} GPU(s), but this machine has {visible} "
        f"visible CUDA device(s){shown} and no Ray cluster to join (RAY_ADDRESS): run where the GPUs are, lower "
        "trainer.n_gpus_per_node (NGPUS_PER_NODE in the scripts), or check the config without a GPU (DRY_RUN=1)"
    )


def _check_gpus(config) -> None:
    # Only on a driver that starts its own Ray: Ray's resource check would fail after ~100 s of start-up. A driver
    # that joins a cluster may be a head node without GPUs, and the cluster's GPUs are not visible from it.
    # trainer.device cpu (as the user gave it) or another accelerator's platform (npu) has no CUDA devices to count.
    if config.trainer.get("device", "cuda") != "cuda" or get_platform().device_name != "cuda":
        return
    if _joins_ray_cluster(config):
        return
    import torch

    problem = gpu_problem(config, torch.cuda.device_count())
    if problem:
        raise RuntimeError(problem)


def preflight(config, fetch_model: bool) -> tuple[list[str], list[str]]:
    """Every start-up check that needs no GPU. Returns (problems, notes); each problem names its key.

    ``fetch_model``: a launch (``main``), which also looks the hub model up and counts this machine's GPUs; a dry
    run (``--validate``) does neither.
    """
    config = copy.deepcopy(config)
    OmegaConf.resolve(config)
    problems, notes = [], []
    checks = [
        _check_pc,
        _check_trainer,
        _check_verl,
        _check_rollout_parallel,
        _check_reward,
        _check_data_files,
        _check_data_rows,
    ]
    checks += [lambda c: _check_model(c, fetch_model)] + ([_check_gpus] if fetch_model else [])
    for check in checks:
        try:
            note = check(config)
        except PCConfigError as err:  # the settings report every bad key at once
            problems += problems_of(err)
        except Exception as err:  # each check reports its own failure; the rest still run
            problems.append(str(err).strip() or type(err).__name__)
        else:
            if note:
                notes.append(note)
    return problems, notes
