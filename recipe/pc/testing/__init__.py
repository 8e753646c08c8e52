"""A test kit for allocator and prompt-filter authors: the real ``RayPCTrainer.fit()`` on CPU, with stand-ins for the
parts of verl 0.9.1 that need a GPU (``recipe.pc.testing.standins``), and the cost model's simulator.

    from recipe.pc.testing import check_resume, price, registered, train

- ``registered(module)``: imports an allocator's or a prompt filter's module (a dotted name, or a ``.py`` file) as
  ``VERL_USE_EXTERNAL_MODULES`` does; what it registers is gone when the block ends, so no other test sees it.
- ``train(folder, allocator, steps)``: that many steps of the real step loop; a ``Run`` with each step's metrics, the
  rows each step trained and the rollouts it generated.
- ``check_resume(folder, allocator, steps, cut)``: a run saved at step ``cut`` and resumed must generate, train and log
  what the uninterrupted run did, and end with the same state bit for bit; an ``AssertionError`` names the difference.
- ``price(allocator, pass_rates)``: the simulator's per-step costs on pass rates (an array, or a rollout dump).
- ``allocator(name, overrides)`` and ``play_round(alloc, state, prompts, outcomes)``: one round without a trainer, on
  rows from ``prompt_rows``, ``rollout_rows`` and ``pilot_of`` (``recipe.pc.testing.rounds``).

The stand-in run: 40 prompts (``PROBS``: pass rates 0, 0.3, 0.5, 0.7 and 1, eight each), steps of ``B`` = 4 prompts,
rounds of ``G`` = 8 new prompts, ``N_PILOT`` = 4 pilot rollouts (``pc.pilot.n``) and ``N_COMMIT`` = 4 commit rollouts
(``pc.n_commit``, the baselines' group size) a prompt, two data-parallel ranks, staleness bound ``MAX_OFF`` = 2. The
rewards are ``acc`` (1 or 0) and ``score`` (+1 or -1), each rollout correct with its prompt's pass rate. The
project's own tests build on the same helpers (``build_trainer``, ``fit_run``, ``resume_run``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import json
import math
import os
import struct
import sys
from pathlib import Path

import numpy as np
import torch

# The project's allocators and prompt filters, registered (with their key groups, which the composed config holds)
# before any `registered` block: they outlive it.
import recipe.pc.allocators  # noqa: F401
import recipe.pc.stages  # noqa: F401
from recipe.pc import metric_names as names
from recipe.pc.allocators import make_allocator
from recipe.pc.registry import ALLOCATORS, PROMPT_FILTERS, registrations_undone
from recipe.pc.settings import PCSettings
from recipe.pc.testing.standins import make_tokenizer

CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "config")

# The stand-in run's shape (build_trainer): prompts a step, new prompts a round, pilot and commit rollouts a prompt,
# the staleness bound.
B, G, N_PILOT, N_COMMIT, MAX_OFF = 4, 8, 4, 4, 2
# 40 prompts: never solved, in-band at three pass rates, and always solved (evicted after epoch 1).
PROBS = [0.0] * 8 + [0.3] * 8 + [0.5] * 8 + [0.7] * 8 + [1.0] * 8
ALWAYS_SOLVED = set(range(32, 40))
# verl's engine splits each rank's rows into micro-batches of these sizes (use_dynamic_bsz=false).
UPDATE = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"
LOG_PROB = "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"
REF = "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"
MICRO_KEYS = (UPDATE, LOG_PROB)
# verl's file logger writes each step's metrics where this variable points.
LOGGER_PATH = "VERL_FILE_LOGGER_PATH"
# Metrics of wall-clock time: the only ones a resumed run may log differently.
CLOCK_METRICS = ("timing_s/", "timing_per_token_ms/", "perf/")


def compose_pc_config(overrides: list[str]):
    """The trainer's config (``config/pc_trainer.yaml`` over verl's), composed with Hydra ``overrides``."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return compose(config_name="pc_trainer", overrides=overrides)


def allocator(name: str = "pilot_commit", overrides=(), seed: int = 0):
    """The registered allocator ``name`` on the trainer's config composed with ``overrides``, its generator seeded: for
    driving it round by round (``play_round``)."""
    config = compose_pc_config([f"algorithm.rollout_allocation={name}", *overrides])
    return make_allocator(PCSettings.from_config(config), np.random.default_rng(seed))


# ---------------------------------------------------------------------- registering an author's module
@contextlib.contextmanager
def registered(module: str | os.PathLike):
    """Import ``module`` (a dotted name on ``sys.path``, or a ``.py`` file) as ``VERL_USE_EXTERNAL_MODULES`` does in
    each process of a run, and yield it: its ``@register``-ed allocators and ``@register_prompt_filter``-ed filters,
    with their key groups, join the registries. When the block ends they and the module are gone, so later tests see
    the project's registrations only and the next ``registered`` imports the module afresh."""
    path = Path(module) if str(module).endswith(".py") else None
    name = path.stem if path else str(module)
    if name in sys.modules:
        raise RuntimeError(
            f"module {name!r} is already imported, so what it registered would outlive the test; import it only "
            "through recipe.pc.testing.registered (and leave it out of VERL_USE_EXTERNAL_MODULES when testing)"
        )
    with registrations_undone():
        before = {*ALLOCATORS, *PROMPT_FILTERS}
        try:
            if path:
                spec = importlib.util.spec_from_file_location(name, path)
                loaded = importlib.util.module_from_spec(spec)
                sys.modules[name] = loaded
                spec.loader.exec_module(loaded)
            else:
                loaded = importlib.import_module(name)
            if not {*ALLOCATORS, *PROMPT_FILTERS} - before:
                raise ValueError(
                    f"module {name!r} registered no allocator and no prompt filter: decorate the class with "
                    "recipe.pc.allocators.base.register or recipe.pc.stages.prompt_filter.register_prompt_filter"
                )
            yield loaded
        finally:
            sys.modules.pop(name, None)


def _choice(allocator: str, prompt_filter: str | None) -> list[str]:
    """The overrides that pick them, once both are known to be registered."""
    for what, picked, registry in (
        ("allocator", allocator, ALLOCATORS),
        ("prompt filter", prompt_filter, PROMPT_FILTERS),
    ):
        if picked is not None and picked not in registry:
            raise ValueError(
                f"no {what} {picked!r} is registered (have {sorted(registry)}); run inside "
                "`with recipe.pc.testing.registered('your_module'):`"
            )
    chosen = [f"algorithm.rollout_allocation={allocator}"]
    return chosen + ([f"algorithm.prompt_filter={prompt_filter}"] if prompt_filter else [])


# ---------------------------------------------------------------------- the trainer on stand-ins
def build_trainer(
    tmp_path,
    tokenizer,
    probs=PROBS,
    extra=(),
    dp_size=2,
    agent_workers=3,
    seed=0,
    trainer_cls=None,
    reward_fn=None,
    edit_rows=None,
    colocated_rm=False,
):
    """A RayPCTrainer (or ``trainer_cls``) on the stand-ins, in the folder ``tmp_path`` (a ``Path``): its prompts
    (one a pass rate of ``probs``) and checkpoints. ``extra``: Hydra overrides; micro-batch sizes are 1 unless set.
    ``reward_fn``: a reward function (``compute_score``'s signature) to call instead of the stand-in's;
    ``edit_rows(frame)``: edits the prompts' pandas frame before it is written; ``colocated_rm``: a reward model
    that scores after generation (``StandInRewardLoopManager``)."""
    import pandas as pd
    from verl.single_controller.ray import ResourcePoolManager
    from verl.trainer.ppo.utils import Role
    from verl.utils.dataset.rl_dataset import collate_fn

    from recipe.pc.dataset import PilotCommitDataset
    from recipe.pc.pc_ray_trainer import RayPCTrainer
    from recipe.pc.testing.standins import (
        ReplicaState,
        StandInActorWorkerGroup,
        StandInAgentLoopManager,
        StandInCheckpointManager,
        StandInRewardLoopManager,
        write_prompt_parquet,
    )

    data = write_prompt_parquet(str(tmp_path / "train.parquet"), probs)
    if edit_rows is not None:
        frame = pd.read_parquet(data)
        edit_rows(frame)
        frame.to_parquet(data)
    cfg = compose_pc_config(
        [
            f"data.train_files={data}",
            f"data.val_files={data}",
            f"data.train_batch_size={B}",
            f"data.gen_batch_size={G}",
            "data.max_prompt_length=48",
            "data.max_response_length=6",
            "data.filter_overlong_prompts=False",
            "data.dataloader_num_workers=0",
            "data.seed=7",
            "actor_rollout_ref.model.path=/no/model/needed",
            "actor_rollout_ref.rollout.name=vllm",
            f"actor_rollout_ref.rollout.n={N_COMMIT}",
            f"actor_rollout_ref.rollout.agent.num_workers={agent_workers}",
            "actor_rollout_ref.actor.ppo_mini_batch_size=4",
            f"algorithm.exploration.n={N_PILOT}",
            f"algorithm.buffer_max_off_steps={MAX_OFF}",
            "trainer.logger=['file']",
            "trainer.val_before_train=False",
            "trainer.test_freq=-1",
            "trainer.save_freq=-1",
            # These runs were written for mini-batches of ppo_mini_batch_size x rollout.n rows; keep that arithmetic
            # unless a preset is chosen (an override would beat the preset's own value).
            *([] if any(e.startswith("preset=") for e in extra) else ["algorithm.mini_batch_unit=rollout_n"]),
            "trainer.total_training_steps=9",
            "trainer.total_epochs=8",
            f"trainer.n_gpus_per_node={dp_size}",
            "trainer.device=cpu",
            f"trainer.default_local_dir={tmp_path / 'ckpt'}",
            *[f"{key}=1" for key in MICRO_KEYS if not any(e.startswith(key + "=") for e in extra)],
            *(["reward.reward_model.enable=true"] if colocated_rm else []),
            *extra,
        ]
    )
    train = PilotCommitDataset(data_files=data, tokenizer=tokenizer, config=cfg.data)
    val = PilotCommitDataset(data_files=data, tokenizer=tokenizer, config=cfg.data)
    trainer = (trainer_cls or RayPCTrainer)(
        config=cfg,
        tokenizer=tokenizer,
        role_worker_mapping={Role.ActorRollout: object},
        resource_pool_manager=ResourcePoolManager({"global_pool": [dp_size]}, {Role.ActorRollout: "global_pool"}),
        train_dataset=train,
        val_dataset=val,
        collate_fn=collate_fn,
    )
    replicas = ReplicaState()
    trainer.actor_rollout_wg = StandInActorWorkerGroup(dp_size, replicas, cfg.actor_rollout_ref)
    trainer.async_rollout_manager = StandInAgentLoopManager(
        cfg, tokenizer, replicas, seed=seed, reward_fn=reward_fn, colocated_rm=colocated_rm
    )
    trainer.checkpoint_manager = StandInCheckpointManager(replicas)
    if colocated_rm:
        trainer.reward_loop_manager = StandInRewardLoopManager(replicas)
    return trainer


# ---------------------------------------------------------------------- metrics a run logs
def read_metrics(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def step_records(path: str) -> list[dict]:
    """The logged per-step records (those with training metrics), in order."""
    out = []
    for rec in read_metrics(path):
        data = rec.get("data", rec)
        if names.GLOBAL_STEP in data:
            out.append(data)
    return out


@contextlib.contextmanager
def _metrics_logged_to(path: str):
    saved = os.environ.get(LOGGER_PATH)
    os.environ[LOGGER_PATH] = path
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(LOGGER_PATH, None)
        else:
            os.environ[LOGGER_PATH] = saved


# ---------------------------------------------------------------------- runs
def trace(trainer):
    """What a run did: training generation inputs per round (validation left out) and trained groups per step."""
    gen = [(c.global_steps, c.prompt_ids.tolist()) for c in trainer.async_rollout_manager.calls if not c.validate]
    updates = [
        (sorted(zip(c.uids, c.rollout_steps, c.acc, strict=True)))
        for c in trainer.actor_rollout_wg.calls
        if c.kind == "update_actor"
    ]
    return gen, updates


@dataclasses.dataclass
class Run:
    """A finished fit(): the trainer (its stand-ins hold every generation call and actor update), its trace and the
    metrics each step logged (``steps``, in order; ``recipe.pc.metric_names`` names them)."""

    trainer: object
    trace: tuple
    steps: list

    @property
    def rows_trained(self) -> list[int]:
        """The rows of each step's actor update, as the stand-in actor received them."""
        return [c.num_rows for c in self.trainer.actor_rollout_wg.calls if c.kind == "update_actor"]

    @property
    def rollouts_generated(self) -> list[int]:
        """Each step's generated rollouts, pilots and commits, without padding (the paper's cost of a step)."""
        return [int(s[names.ROLLOUTS_SAMPLED]) for s in self.steps]

    @property
    def state(self) -> dict:
        """What a checkpoint would save now: the allocator's state (``state["allocator"]["state"]``), the prompt
        filter's, the counters, the random generator and the dataset's evictions."""
        return self.trainer._pc_state()


def fit_run(folder, tokenizer, extra=(), **kwargs) -> Run:
    """fit() a trainer built in ``folder`` (made if needed; ``build_trainer``'s keywords), its metrics logged to
    ``folder``/metrics.jsonl from its start."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    log = str(folder / "metrics.jsonl")
    if os.path.exists(log):
        os.remove(log)  # a run resumed in the folder of its first part: only the steps it ran itself
    trainer = build_trainer(folder, tokenizer, extra=extra, **kwargs)
    with _metrics_logged_to(log):
        trainer.fit()
    return Run(trainer, trace(trainer), step_records(log))


def resume_run(folder, tokenizer, extra, checkpoint, **kwargs) -> Run:
    """fit() from ``checkpoint`` (a global_step_<n> folder of another run) into a fresh ``folder``."""
    return fit_run(folder, tokenizer, [*extra, *resume_from(checkpoint)], **kwargs)


def resume_from(checkpoint) -> list[str]:
    """The overrides that resume a run from ``checkpoint``, a global_step_<n> folder."""
    return ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={checkpoint}"]


def assert_resumed_like(resumed: Run, full: Run, cut: int) -> None:
    """A run resumed at step ``cut`` loaded that step's weights and generated and trained exactly what the
    uninterrupted run ``full`` did from there on, round by round and step by step."""
    full_gen, full_updates = full.trace
    gen, trained = resumed.trace
    _expect(resumed.trainer.actor_rollout_wg.loaded_step == cut, f"the resumed run did not load step {cut}")
    # Selected by step, not by round count: a round whose prompts were all left out makes no generation call.
    _expect(gen == [g for g in full_gen if g[0] > cut], f"generation inputs differ after resuming at step {cut}")
    _expect(trained == full_updates[cut:], f"trained groups differ after resuming at step {cut}")


def _expect(holds: bool, message: str) -> None:
    # Not an assert statement: the kit's checks hold under python -O too.
    if not holds:
        raise AssertionError(message)


# ---------------------------------------------------------------------- the author's three checks
def train(
    folder,
    allocator: str = "pilot_commit",
    steps: int = 4,
    *,
    prompt_filter: str | None = None,
    overrides=(),
    pass_rates=PROBS,
    tokenizer=None,
    **build,
) -> Run:
    """``steps`` steps of ``RayPCTrainer.fit()`` with ``algorithm.rollout_allocation=allocator`` (and
    ``algorithm.prompt_filter=prompt_filter``) on the stand-ins, in ``folder``: the prompts (one a pass rate of
    ``pass_rates``), checkpoints and metrics.jsonl. ``overrides``: Hydra overrides of the trainer's config (an
    allocator's own keys included); ``build``: ``build_trainer``'s keywords (``dp_size``, ``seed``, ...)."""
    extra = [*_choice(allocator, prompt_filter), f"trainer.total_training_steps={steps}", *overrides]
    return fit_run(folder, tokenizer or make_tokenizer(), extra, probs=pass_rates, **build)


def check_resume(folder, allocator: str = "pilot_commit", steps: int = 6, cut: int = 3, **kwargs) -> tuple[Run, Run]:
    """Train ``steps`` steps saving at step ``cut`` (in ``folder``/full), resume from that checkpoint (in
    ``folder``/resumed) and check that the resumed run loaded step ``cut``, generated and trained what the
    uninterrupted one did after it, logged the same metrics (wall-clock times aside) and ended with the same state,
    bit for bit: the allocator's, the prompt filter's, the counters. ``kwargs``: ``train``'s. Returns (uninterrupted,
    resumed); an ``AssertionError`` names the first difference."""
    if not 0 < cut < steps:
        raise ValueError(f"cut={cut} must lie strictly between 0 and steps={steps}")
    overrides = [*kwargs.pop("overrides", ()), f"trainer.save_freq={cut}"]
    folder = Path(folder)
    full = train(folder / "full", allocator, steps, overrides=overrides, **kwargs)
    resume = resume_from(folder / "full" / "ckpt" / f"global_step_{cut}")
    resumed = train(folder / "resumed", allocator, steps, overrides=[*overrides, *resume], **kwargs)
    assert_resumed_like(resumed, full, cut)
    _expect(len(resumed.steps) == steps - cut, f"the resumed run logged {len(resumed.steps)} steps, not {steps - cut}")
    for step, (got, want) in enumerate(zip(resumed.steps, full.steps[cut:], strict=True), start=cut + 1):
        difference = first_difference(_unclocked(got), _unclocked(want), f"step {step} metrics")
        _expect(difference is None, f"after resuming at step {cut}: {difference}")
    difference = first_difference(resumed.state, full.state, "state")
    _expect(difference is None, f"after resuming at step {cut}, the final {difference}")
    return full, resumed


def _unclocked(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if not k.startswith(CLOCK_METRICS)}


def first_difference(got, want, where: str) -> str | None:
    """Where two plain-data values (numbers, strings, None, tensors, arrays, and lists, tuples and dicts of them)
    first differ, bit for bit (a NaN equals a NaN), as ``where.key[i]: got X, want Y``; None when they do not."""
    if isinstance(want, dict) and isinstance(got, dict):
        if set(got) != set(want):
            return f"{where}: keys {sorted(map(str, set(got) ^ set(want)))} are in only one of them"
        for key in sorted(want, key=str):
            if (found := first_difference(got[key], want[key], f"{where}.{key}")) is not None:
                return found
        return None
    if isinstance(want, list | tuple) and type(got) is type(want):
        if len(got) != len(want):
            return f"{where}: {len(got)} items, want {len(want)}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            if (found := first_difference(g, w, f"{where}[{i}]")) is not None:
                return found
        return None
    if type(got) is not type(want) or not _same_bits(got, want):
        return f"{where}: got {_short(got)}, want {_short(want)}"
    return None


def _same_bits(got, want) -> bool:
    if isinstance(want, torch.Tensor):
        got, want = got.detach().cpu().numpy(), want.detach().cpu().numpy()
    if isinstance(want, np.ndarray):
        return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
    if isinstance(want, float):  # -0.0 is not 0.0, and a NaN is a NaN
        return struct.pack("<d", got) == struct.pack("<d", want) or (math.isnan(got) and math.isnan(want))
    return got == want


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def price(allocator: str, pass_rates, overrides=(), *, steps: int = 200, warmup: int = 20, seed: int = 0, metric="acc"):
    """The simulator's mean per-step costs (a ``recipe.pc_tools.costmodel.Prediction``: rounds, pilot and commit
    rollouts, trained and informative groups) of ``allocator`` with ``overrides`` (``key=value``) of the trainer's
    config, on ``pass_rates``: an array of per-prompt pass rates, or a rollout dump (a folder of ``<step>.jsonl``
    files or their packed Parquet file) read as ``plan`` reads it, by the reward extra ``metric``."""
    # The offline tools: only this helper of the kit needs them (the training plugin never imports them).
    from recipe.pc_tools import costmodel, dumps

    _choice(allocator, None)
    if isinstance(pass_rates, str | os.PathLike):
        _, seen, wins = dumps.read_pass_counts(dumps.step_files(str(pass_rates), (None, None)), metric)
        pass_rates = dumps.pass_rates(seen, wins, (0.0, 0.0))
    config = costmodel.Registered((f"algorithm.rollout_allocation={allocator}", *overrides), allocator)
    return costmodel.simulate(pass_rates, config, steps=steps, warmup=warmup, seed=seed)


from recipe.pc.testing.rounds import pilot_of, play_round, prompt_rows, rollout_rows  # noqa: E402

__all__ = [
    "ALWAYS_SOLVED",
    "B",
    "G",
    "LOG_PROB",
    "MAX_OFF",
    "MICRO_KEYS",
    "N_COMMIT",
    "N_PILOT",
    "PROBS",
    "REF",
    "UPDATE",
    "Run",
    "allocator",
    "assert_resumed_like",
    "build_trainer",
    "check_resume",
    "compose_pc_config",
    "first_difference",
    "fit_run",
    "make_tokenizer",
    "pilot_of",
    "play_round",
    "price",
    "prompt_rows",
    "read_metrics",
    "registered",
    "resume_from",
    "resume_run",
    "rollout_rows",
    "step_records",
    "train",
    "trace",
]
