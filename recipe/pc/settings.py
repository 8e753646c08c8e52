"""The Pilot-Commit keys of the Hydra config, read once into typed groups whose errors name the key.

Every field names its config key (``key(...)``) and its Python type in the annotation. Values come from the config
alone: ``config/pc_trainer.yaml`` holds the core keys' defaults (they are the ``improved`` behaviour), each registered
key group its own (an allocator's, a prompt filter's or an allocation primitive's, ``recipe.pc.registry``; composed
before the YAML), ``preset=reference`` overrides some, the command line the rest; a key missing from the config is an
error, not a silent default. Each group checks its own ranges; ``PCSettings`` checks what spans the core groups, each
registered group checks itself against the rest (``KeyGroup.check``), and the allocator named by
``algorithm.rollout_allocation`` adds its own checks (``recipe.pc.allocators``). A setting has one key, whichever
allocator reads it: DAPO's group filter reads ``algorithm.agg_metric`` and ``algorithm.max_num_gen_batches``, and
verl's DAPO keys (``algorithm.filter_groups.*``) are refused when set (``KEYS_NOT_READ``).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TypeVar

from omegaconf import OmegaConf

from recipe.pc.errors import PCConfigError, PCConfigErrors, problems_of
from recipe.pc.registry import ALLOCATORS, KEY_GROUPS, KeyGroup, in_unit_interval, key, owned_defaults
from recipe.pc.replay_buffer import PROMPT_STRATEGIES, RESPONSE_STRATEGIES, TAKE_ALL_ORDERS, TIE_ORDERS
from recipe.pc.val_metrics import VAL_METRICS

CONFIG_FILE = Path(__file__).parent / "config" / "pc_trainer.yaml"
G = TypeVar("G", bound=KeyGroup)
NOT_CHECKED = (
    "not checked: how the settings fit together (batch sizes, rounds, buffer, the allocator's own checks), until "
    "the keys above are fixed"
)
MINI_BATCH_UNITS = ("group", "rollout_n")
ROW_ORDERS = ("verl", "reference")

# Options that verl 0.9.1's stock RayPPOTrainer.fit() acts on but RayPCTrainer.fit() does not run:
# (key, the default that is accepted, why it is refused).
STOCK_OPTIONS_NOT_RUN = (
    ("global_profiler.steps", None, "the Pilot-Commit loop does not start or stop verl's step profiler"),
    (
        "trainer.esi_redundant_time",
        0,
        "the Pilot-Commit loop does not force a checkpoint before an elastic instance expires",
    ),
)
# verl's DAPO recipe keys, which no allocator here reads: (key, verl's default, the key read instead).
KEYS_NOT_READ = (
    ("algorithm.filter_groups.enable", False, "algorithm.rollout_allocation=dapo"),
    ("algorithm.filter_groups.metric", "reward", "algorithm.agg_metric"),
    ("algorithm.filter_groups.max_num_gen_batches", 0, "algorithm.max_num_gen_batches"),
)


def yaml_defaults():
    """The Pilot-Commit keys' own defaults (no verl defaults, no preset), for the offline tools: the YAML's, over the
    registered key groups' (import ``recipe.pc.allocators`` and ``recipe.pc.stages`` first, as the tools do)."""
    return OmegaConf.merge(owned_defaults(), OmegaConf.load(CONFIG_FILE))


@dataclass(frozen=True)
class PilotSettings(KeyGroup):
    """How a prompt is piloted and what its pilot decides."""

    n: int = key("algorithm.exploration.n")  # pilot rollouts per prompt
    n_effective: int = key("algorithm.exploration.n_effective", fallback="algorithm.exploration.n")  # reused
    screen_n: int | None = key("algorithm.exploration.screen_n")  # screening pilot (null: off)
    p_lower: float = key("algorithm.diversity_threshold_lower")
    p_upper: float = key("algorithm.diversity_threshold_upper")
    evict_threshold: float | None = key("algorithm.exclude_threshold_upper")

    def validate(self) -> None:
        if self.n < 1:
            raise PCConfigError(f"algorithm.exploration.n={self.n} must be at least 1")
        if not 1 <= self.n_effective <= self.n:
            raise PCConfigError(
                f"algorithm.exploration.n_effective={self.n_effective} must lie in "
                f"[1, algorithm.exploration.n={self.n}]: only generated pilot rollouts can be reused"
            )
        if self.screen_n is not None and not 2 <= self.screen_n < self.n:
            raise PCConfigError(
                f"algorithm.exploration.screen_n={self.screen_n} must lie in [2, algorithm.exploration.n="
                f"{self.n}): a screen needs two rollouts to disagree and must leave some of the pilot"
            )
        in_unit_interval("algorithm.diversity_threshold_lower", self.p_lower)
        in_unit_interval("algorithm.diversity_threshold_upper", self.p_upper)
        if self.p_lower > 1.0 - self.p_upper:
            raise PCConfigError(
                f"empty band: algorithm.diversity_threshold_lower={self.p_lower} is above "
                f"1 - algorithm.diversity_threshold_upper={1.0 - self.p_upper}; no prompt could pass the pilot"
            )
        if self.evict_threshold is not None and not 0.0 < self.evict_threshold <= 1.0:
            raise PCConfigError(
                f"algorithm.exclude_threshold_upper={self.evict_threshold} must lie in (0, 1], "
                "or be null to never evict"
            )


@dataclass(frozen=True)
class BufferSettings(KeyGroup):
    """The replay buffer that holds passing pilot groups until they are committed."""

    size: int = key("algorithm.buffer_size")  # prompts; the oldest go when it is full
    max_off_steps: int = key("algorithm.buffer_max_off_steps")  # staleness bound, optimizer steps
    prompt_strategy: str = key("algorithm.buffer_sampling_method")
    response_strategy: str = key("algorithm.buffer_response_sampling_method")
    tie_order: str = key("algorithm.buffer_tie_order")
    take_all_order: str = key("algorithm.buffer_take_all_order")

    def validate(self) -> None:
        if self.size < 1:
            raise PCConfigError(f"algorithm.buffer_size={self.size} must be at least 1")
        if self.max_off_steps < 0:
            raise PCConfigError(f"algorithm.buffer_max_off_steps={self.max_off_steps} must be >= 0")
        for name, value, allowed in (
            ("algorithm.buffer_sampling_method", self.prompt_strategy, PROMPT_STRATEGIES),
            ("algorithm.buffer_response_sampling_method", self.response_strategy, RESPONSE_STRATEGIES),
            ("algorithm.buffer_tie_order", self.tie_order, TIE_ORDERS),
            ("algorithm.buffer_take_all_order", self.take_all_order, TAKE_ALL_ORDERS),
        ):
            if value not in allowed:
                raise PCConfigError(f"{name}={value!r}; choose one of {allowed}")


@dataclass(frozen=True)
class ReferenceSettings(KeyGroup):
    """The run semantics where the reference preset (the authors' runs) and the default (improved) differ."""

    mini_batch_unit: str = key("algorithm.mini_batch_unit")  # group | rollout_n
    partial_mini_batch: bool = key("algorithm.partial_mini_batch")
    carry_over_epoch: bool = key("algorithm.carry_over_epoch")
    row_order: str = key("algorithm.row_order")  # verl | reference
    preset: str | None = key("trainer.preset")  # the preset chosen (null: none, the defaults)

    def validate(self) -> None:
        for name, value, allowed in (
            ("algorithm.mini_batch_unit", self.mini_batch_unit, MINI_BATCH_UNITS),
            ("algorithm.row_order", self.row_order, ROW_ORDERS),
        ):
            if value not in allowed:
                raise PCConfigError(f"{name}={value!r}; choose one of {allowed}")


@dataclass(frozen=True)
class PCSettings(KeyGroup):
    method: str = key("algorithm.rollout_allocation")  # the allocator: pilot_commit, grpo, dapo, ...
    train_batch_size: int = key("data.train_batch_size")  # B: prompts per optimizer step
    gen_batch_size: int = key("data.gen_batch_size", fallback="data.train_batch_size")  # G: new prompts a round
    n_commit: int = key("actor_rollout_ref.rollout.n")  # commit rollouts (PC) or the group size (baselines)
    agg_metric: str = key("algorithm.agg_metric")  # per-rollout field the filters read
    max_num_gen_batches: int = key("algorithm.max_num_gen_batches")  # rounds a step (<= 0: unlimited)
    min_train_prompts: int | None = key("algorithm.min_train_prompts")
    raise_on_unfilled_batch: bool = key("algorithm.raise_on_unfilled_batch")
    seed: int = key("algorithm.seed", fallback="data.seed", if_none=0)
    # Validate when the cumulative generated rollouts reach each multiple of it (null: off; recipe.pc.val_budget).
    val_rollout_interval: int | None = key("trainer.val_rollout_interval")
    val_metrics: str = key("trainer.val_metrics")  # mean (no bootstraps) | full (verl's every metric)
    # null: the filter a registered key group picks (algorithm.skip.enable=true: skip), else all
    prompt_filter: str | None = key("algorithm.prompt_filter")
    pilot: PilotSettings
    buffer: BufferSettings
    reference: ReferenceSettings
    # The registered key groups (``recipe.pc.registry.register_keys``) by name: allocators', filters' and the
    # allocation primitives' own keys; ``group(cls)`` gives one.
    owned: dict = dataclasses.field(default_factory=dict, metadata={"owned": True})

    @classmethod
    def read(cls, config) -> PCSettings:
        """Every group read and checked, the registered ones included, before any error is raised: one
        ``PCConfigErrors`` lists them all. The checks across groups run only once every key is good (until then one
        line says they were not checked), and each of them runs whatever the others found."""
        values, problems = cls._read_fields(config)
        owned = {}
        for name, group in KEY_GROUPS.items():
            try:
                owned[name] = group.read(config)
            except PCConfigError as err:
                problems += problems_of(err)
        if problems:
            raise PCConfigErrors([*problems, NOT_CHECKED])
        settings = cls(**values, owned=owned)
        checks = [settings.validate, *(functools.partial(g.check, settings) for g in owned.values())]
        checks.append(lambda: settings.allocator.check_settings(settings))
        for check in checks:
            try:
                check()
            except PCConfigError as err:
                problems += [p for p in problems_of(err) if p not in problems]
        if problems:
            raise PCConfigErrors(problems)
        return settings

    @classmethod
    def keys(cls) -> list[str]:
        return list(dict.fromkeys([*super().keys(), *(k for g in KEY_GROUPS.values() for k in g.keys())]))

    def group(self, cls: type[G]) -> G:
        """The settings of a registered key group."""
        if cls.name not in self.owned:
            raise PCConfigError(
                f"no key group {cls.name!r} was registered when these settings were read; import its module first"
            )
        return self.owned[cls.name]

    @classmethod
    def from_config(cls, config) -> PCSettings:
        check_supported_options(config)
        settings = cls.read(config)
        if settings.reference.partial_mini_batch:
            check_partial_mini_batch(config.actor_rollout_ref.actor)
        return settings

    @cached_property
    def allocator(self) -> type:
        """The allocator class ``method`` names; it answers the settings questions that depend on the method."""
        return allocator_class(self.method)

    @property
    def prompt_filter_name(self) -> str:
        """The registered prompt filter that picks each round's prompts (``recipe.pc.stages.prompt_filter``)."""
        picked = (group.prompt_filter() for group in self.owned.values())
        return self.prompt_filter or next((name for name in picked if name), "all")

    @property
    def group_size(self) -> int:
        """Rows per trained prompt."""
        return self.allocator.group_size(self)

    @property
    def train_rows(self) -> int:
        return self.train_batch_size * self.group_size

    @property
    def mini_batch_multiplier(self) -> int:
        """Rows per ``ppo_mini_batch_size`` unit: rollout.n (verl's and the reference's rule) or the group size."""
        return self.group_size if self.reference.mini_batch_unit == "group" else self.n_commit

    def validate(self) -> None:
        if self.train_batch_size < 1 or self.gen_batch_size < 1:
            raise PCConfigError(
                f"data.train_batch_size={self.train_batch_size} and data.gen_batch_size={self.gen_batch_size} "
                "must be positive"
            )
        if self.n_commit < 1:
            raise PCConfigError(f"actor_rollout_ref.rollout.n={self.n_commit} (commit rollouts) must be at least 1")
        if self.min_train_prompts is not None and not 1 <= self.min_train_prompts <= self.train_batch_size:
            raise PCConfigError(
                f"algorithm.min_train_prompts={self.min_train_prompts} must lie in [1, data.train_batch_size="
                f"{self.train_batch_size}], or be null for the smallest batch that splits into whole mini-batches"
            )
        productive_rounds = self.max_num_gen_batches - self.allocator.idle_rounds(self)
        if self.max_num_gen_batches > 0 and self.gen_batch_size * productive_rounds < self.train_batch_size:
            raise PCConfigError(
                f"data.gen_batch_size={self.gen_batch_size} over max_num_gen_batches={self.max_num_gen_batches} "
                f"rounds cannot supply data.train_batch_size={self.train_batch_size} prompts even if every prompt "
                "passed; raise data.gen_batch_size or the round limit"
            )
        if self.val_rollout_interval is not None and self.val_rollout_interval < 1:
            raise PCConfigError(
                f"trainer.val_rollout_interval={self.val_rollout_interval} must be a positive number of generated "
                "rollouts (validation each time the cumulative count reaches a multiple of it), or null for off"
            )
        if self.val_metrics not in VAL_METRICS:
            raise PCConfigError(
                f"trainer.val_metrics={self.val_metrics!r}; choose one of {VAL_METRICS}: mean (mean@N and std@N, "
                "the default) or full (verl's best@k, worst@k and maj@k bootstraps too)"
            )
        if self.buffer.size < self.train_batch_size:
            raise PCConfigError(
                f"algorithm.buffer_size={self.buffer.size} is below data.train_batch_size={self.train_batch_size}: "
                "a step could never be filled from the buffer"
            )


def allocator_class(method: str) -> type:
    """The registered allocator class of ``algorithm.rollout_allocation=method``."""
    if not ALLOCATORS:
        raise PCConfigError(
            f"algorithm.rollout_allocation={method!r}: no allocator is registered in this process; import "
            "recipe.pc.allocators (the trainer and the tools do) before reading the settings"
        )
    if method not in ALLOCATORS:
        raise PCConfigError(f"algorithm.rollout_allocation={method!r}; choose one of {sorted(ALLOCATORS)}")
    return ALLOCATORS[method]


def check_supported_options(config) -> None:
    """Refuse stock trainer options that this trainer's fit() would silently ignore."""
    for name, default, why in STOCK_OPTIONS_NOT_RUN:
        value = OmegaConf.select(config, name, default=default)
        if value != default:
            shown = "null" if default is None else default
            raise PCConfigError(f"{name}={value!r} is not supported: {why}; leave it at {shown}")
    for name, default, instead in KEYS_NOT_READ:
        value = OmegaConf.select(config, name, default=default)
        if value != default:
            raise PCConfigError(
                f"{name}={value!r} is verl's DAPO recipe key, not read here: set {instead} (every allocator reads it, "
                f"DAPO's group filter too) and leave {name} at {default}"
            )
    corr = OmegaConf.select(config, "algorithm.rollout_correction", default=None)
    if corr is not None and (corr.get("bypass_mode") or corr.get("rollout_is") or corr.get("rollout_rs")):
        raise PCConfigError(
            "algorithm.rollout_correction is on, but reused pilot rollouts come from a policy up to "
            "buffer_max_off_steps + 1 steps old and carry no matching behaviour log-probs; turn it off"
        )
    estimator = OmegaConf.select(config, "algorithm.adv_estimator", default=None)
    if str(estimator).lower() == "remax":
        raise PCConfigError(
            "algorithm.adv_estimator=remax is not supported: the Pilot-Commit loop generates no greedy baseline "
            "rollouts; use grpo (or another group estimator)"
        )


def check_partial_mini_batch(actor) -> None:
    """algorithm.partial_mini_batch weights the last mini-batch through the reference loss, over rows in order."""
    from recipe.pc.reference_loss import LOSS_MODE

    loss_mode = OmegaConf.select(actor, "policy_loss.loss_mode", default="vanilla")
    if loss_mode != LOSS_MODE:
        raise PCConfigError(
            f"algorithm.partial_mini_batch=true needs actor_rollout_ref.actor.policy_loss.loss_mode={LOSS_MODE} "
            f"(got {loss_mode!r}): that loss weights the partial mini-batch by its real rows, as verl 0.5 did"
        )
    if actor.get("loss_agg_mode", "token-mean") != "token-mean":
        raise PCConfigError(
            f"algorithm.partial_mini_batch=true needs actor_rollout_ref.actor.loss_agg_mode=token-mean "
            f"(got {actor.loss_agg_mode!r}): the reference loss reproduces verl 0.5's token-mean"
        )
    if actor.get("shuffle", False):
        raise PCConfigError(
            "algorithm.partial_mini_batch=true needs actor_rollout_ref.actor.shuffle=false: shuffling would move "
            "the padding rows out of the last mini-batch"
        )
    # verl 0.9.1 adds these terms outside the policy loss, with its own aggregation: they would not follow 0.5's.
    if actor.get("use_kl_loss", False):
        raise PCConfigError(
            "algorithm.partial_mini_batch=true needs actor_rollout_ref.actor.use_kl_loss=false: verl adds the KL "
            "term outside the reference loss, so it would not be aggregated as verl 0.5 did"
        )
    if float(actor.get("entropy_coeff", 0) or 0) != 0:
        raise PCConfigError(
            f"algorithm.partial_mini_batch=true needs actor_rollout_ref.actor.entropy_coeff=0 (got "
            f"{actor.entropy_coeff}): verl adds the entropy term outside the reference loss"
        )
