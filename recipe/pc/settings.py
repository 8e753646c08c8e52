"""The Pilot-Commit keys of the Hydra config, read once and checked with errors that name the key.

Each field of ``PCSettings`` names its config key in ``pc_key(...)`` and its Python type in the
annotation; ``from_config`` reads every key strictly by that type, so adding a key is one field.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from recipe.pc.replay_buffer import PROMPT_STRATEGIES, RESPONSE_STRATEGIES, TIE_ORDERS
from recipe.pc.stages.skip import SkipRule

METHODS = ("pilot_commit", "grpo", "dapo")
DAPO_STEP_UNITS = ("update", "round")

_ABSENT = object()
CONFIG_FILE = Path(__file__).parent / "config" / "pc_trainer.yaml"


def yaml_defaults():
    """The YAML's own values of the Pilot-Commit keys (no verl defaults, no preset), for the offline tools."""
    return OmegaConf.load(CONFIG_FILE)

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


class PCConfigError(ValueError):
    """A Pilot-Commit config value that cannot work; the message names the key and a fix."""


def pc_key(key: str, *, default=_ABSENT, fallback: str | None = None, if_none=_ABSENT, dapo_key: str | None = None):
    """A settings field read from config ``key``.

    ``default``: used when the key is absent; ``fallback``: another key read when the value is null;
    ``if_none``: the value when both are null; ``dapo_key``: the key read instead when the method is dapo.
    """
    meta = {"key": key, "default": default, "fallback": fallback, "if_none": if_none, "dapo_key": dapo_key}
    return dataclasses.field(metadata=meta)


def _strict(key: str, value, annotation):
    """``value`` as ``annotation`` (bool, int, float, str, optionally ``| None``), or an error naming ``key``."""
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else ()
    nullable = type(None) in args
    base = next((a for a in args if a is not type(None)), annotation)
    if value is None and nullable:
        return None
    # bool is a subclass of int: keep true/false out of numeric keys and numbers out of flags.
    if base is bool and isinstance(value, bool):
        return value
    if base is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if base is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if base is str and isinstance(value, str):
        return value
    wanted = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}[base]
    null = " or null" if nullable else ""
    shown = "null" if value is None else f"{value!r} ({type(value).__name__})"
    raise PCConfigError(f"{key}={shown} must be {wanted}{null}")


def check_supported_options(config) -> None:
    """Refuse stock trainer options that this trainer's fit() would silently ignore."""
    for key, default, why in STOCK_OPTIONS_NOT_RUN:
        value = OmegaConf.select(config, key, default=default)
        if value != default:
            shown = "null" if default is None else default
            raise PCConfigError(f"{key}={value!r} is not supported: {why}; leave it at {shown}")
    estimator = OmegaConf.select(config, "algorithm.adv_estimator", default=None)
    if str(estimator).lower() == "remax":
        raise PCConfigError(
            "algorithm.adv_estimator=remax is not supported: the Pilot-Commit loop generates no greedy baseline "
            "rollouts; use grpo (or another group estimator)"
        )


@dataclass(frozen=True)
class PCSettings:
    # pilot_commit, or a baseline on the same loop: grpo | dapo. Read first: dapo reads two keys elsewhere.
    method: str = pc_key("algorithm.rollout_allocation", default="pilot_commit")
    train_batch_size: int = pc_key("data.train_batch_size")  # B: prompts per optimizer step
    gen_batch_size: int = pc_key("data.gen_batch_size", default=None, fallback="data.train_batch_size")  # G
    n_pilot: int = pc_key("algorithm.exploration.n")
    # pilot rollouts reused in a training group
    n_pilot_effective: int = pc_key(
        "algorithm.exploration.n_effective", default=None, fallback="algorithm.exploration.n"
    )
    n_commit: int = pc_key("actor_rollout_ref.rollout.n")
    p_lower: float = pc_key("algorithm.diversity_threshold_lower")
    p_upper: float = pc_key("algorithm.diversity_threshold_upper")
    evict_threshold: float | None = pc_key("algorithm.exclude_threshold_upper")
    # the band's metric (pilot_commit) or the group filter's metric (dapo)
    agg_metric: str = pc_key("algorithm.agg_metric", dapo_key="algorithm.filter_groups.metric")
    # <= 0: unlimited rounds per step
    max_num_gen_batches: int = pc_key(
        "algorithm.max_num_gen_batches", dapo_key="algorithm.filter_groups.max_num_gen_batches"
    )
    buffer_size: int = pc_key("algorithm.buffer_size")
    buffer_max_off_steps: int = pc_key("algorithm.buffer_max_off_steps")
    prompt_strategy: str = pc_key("algorithm.buffer_sampling_method")
    response_strategy: str = pc_key("algorithm.buffer_response_sampling_method")
    seed: int = pc_key("algorithm.seed", default=None, fallback="data.seed", if_none=0)
    # rollout_n: ppo_mini_batch_size x rollout.n rows (reference); group: x group size
    mini_batch_unit: str = pc_key("algorithm.mini_batch_unit", default="rollout_n")
    # keep the buffer and a partial batch across an epoch boundary
    carry_over_epoch: bool = pc_key("algorithm.carry_over_epoch", default=True)
    # train a batch unfilled after max_num_gen_batches rounds if it has this many
    min_train_prompts: int | None = pc_key("algorithm.min_train_prompts", default=None)
    # ... or stop with an error instead
    raise_on_unfilled_batch: bool = pc_key("algorithm.raise_on_unfilled_batch", default=False)
    # --- reference-preset keys (issue #11) ---
    # a step may end in a partial PPO mini-batch, weighted by its share of rows
    partial_mini_batch: bool = pc_key("algorithm.partial_mini_batch", default=False)
    # DAPO: total_training_steps counts optimizer steps (update) or generation rounds (round)
    dapo_step_unit: str = pc_key("algorithm.dapo_step_unit", default="update")
    # max_variance ties on (std, step): newest_first | oldest_first
    buffer_tie_order: str = pc_key("algorithm.buffer_tie_order", default="newest_first")
    # --- allocator stages (issue #10) ---
    # screening pilot: first pilot rollouts per prompt; the rest only where they disagree (null: off)
    screen_n: int | None = pc_key("algorithm.exploration.screen_n", default=None)
    # PODS: rollouts generated per GRPO/DAPO group or PC commit, of which rollout.n are trained (null: off)
    downsample_n: int | None = pc_key("algorithm.downsample.n", default=None)
    # GRESO: skip prompts before generation by their history of zero-variance groups (see stages/skip.py)
    skip_enable: bool = pc_key("algorithm.skip.enable", default=False)
    skip_explore_floor: float = pc_key("algorithm.skip.explore_floor", default=0.01)  # least keep probability
    skip_p_init: float = pc_key("algorithm.skip.p_init", default=0.5)  # starting exploration probabilities
    skip_p_step: float = pc_key("algorithm.skip.p_step", default=0.01)  # their change per step
    skip_p_min: float = pc_key("algorithm.skip.p_min", default=0.05)
    skip_p_max: float = pc_key("algorithm.skip.p_max", default=0.95)
    # share of zero-variance groups aimed for: a third all-correct, two thirds all-wrong
    skip_target_zero_variance: float = pc_key("algorithm.skip.target_zero_variance", default=0.25)

    @property
    def group_size(self) -> int:
        """Rows per trained prompt: reused pilots + commits, or rollout.n for the baselines."""
        if self.method == "pilot_commit":
            return self.n_pilot_effective + self.n_commit
        return self.n_commit

    def skip_rule(self) -> SkipRule | None:
        """The skipping knobs, or None when ``algorithm.skip.enable`` is off."""
        if not self.skip_enable:
            return None
        return SkipRule(
            explore_floor=self.skip_explore_floor,
            p_init=self.skip_p_init,
            p_step=self.skip_p_step,
            p_min=self.skip_p_min,
            p_max=self.skip_p_max,
            target_zero_variance=self.skip_target_zero_variance,
        )

    @property
    def n_generated(self) -> int:
        """Rollouts generated per trained group (baselines) or per commit (PC); rollout.n of them train."""
        return self.n_commit if self.downsample_n is None else self.downsample_n

    @property
    def train_rows(self) -> int:
        return self.train_batch_size * self.group_size

    @classmethod
    def from_config(cls, config) -> PCSettings:
        check_supported_options(config)
        hints = typing.get_type_hints(cls)
        values: dict = {}
        for f in dataclasses.fields(cls):
            meta = f.metadata
            key = meta["dapo_key"] if meta["dapo_key"] and values.get("method") == "dapo" else meta["key"]
            value = OmegaConf.select(config, key, default=_ABSENT)
            if value is _ABSENT:
                if meta["default"] is _ABSENT:
                    raise PCConfigError(f"{key} is missing from the config")
                value = meta["default"]
            if value is None and meta["fallback"]:
                key, value = meta["fallback"], OmegaConf.select(config, meta["fallback"], default=None)
            if value is None and meta["if_none"] is not _ABSENT:
                value = meta["if_none"]
            values[f.name] = _strict(key, value, hints[f.name])
        settings = cls(**values)
        settings.validate()
        if settings.partial_mini_batch:  # --- reference-preset keys (issue #11) ---
            check_partial_mini_batch(config.actor_rollout_ref.actor)
        return settings

    def validate(self) -> None:
        # --- reference-preset keys (issue #11) ---
        if self.dapo_step_unit not in DAPO_STEP_UNITS:
            raise PCConfigError(f"algorithm.dapo_step_unit={self.dapo_step_unit!r}; choose one of {DAPO_STEP_UNITS}")
        if self.buffer_tie_order not in TIE_ORDERS:
            raise PCConfigError(f"algorithm.buffer_tie_order={self.buffer_tie_order!r}; choose one of {TIE_ORDERS}")
        if self.mini_batch_unit not in ("rollout_n", "group"):
            raise PCConfigError(f"algorithm.mini_batch_unit={self.mini_batch_unit!r}; choose 'rollout_n' or 'group'")
        if self.method not in METHODS:
            raise PCConfigError(f"algorithm.rollout_allocation={self.method!r}; choose one of {METHODS}")
        if self.method == "grpo" and self.gen_batch_size != self.train_batch_size:
            raise PCConfigError(
                f"GRPO trains every prompt of its one round: set data.gen_batch_size={self.gen_batch_size} "
                f"equal to data.train_batch_size={self.train_batch_size}"
            )
        for key, value in (
            ("algorithm.diversity_threshold_lower", self.p_lower),
            ("algorithm.diversity_threshold_upper", self.p_upper),
        ):
            if not 0.0 <= value <= 1.0:  # also rejects NaN
                raise PCConfigError(f"{key}={value} must lie in [0, 1]")
        if self.evict_threshold is not None and not 0.0 < self.evict_threshold <= 1.0:
            raise PCConfigError(
                f"algorithm.exclude_threshold_upper={self.evict_threshold} must lie in (0, 1], "
                "or be null to never evict"
            )
        if self.p_lower > 1.0 - self.p_upper:
            raise PCConfigError(
                f"empty band: algorithm.diversity_threshold_lower={self.p_lower} is above "
                f"1 - algorithm.diversity_threshold_upper={1.0 - self.p_upper}; no prompt could pass the pilot"
            )
        if self.min_train_prompts is not None and not 1 <= self.min_train_prompts <= self.train_batch_size:
            raise PCConfigError(
                f"algorithm.min_train_prompts={self.min_train_prompts} must lie in [1, data.train_batch_size="
                f"{self.train_batch_size}], or be null for the smallest batch that splits into whole mini-batches"
            )
        # Pilot-Commit commits nothing in a step's first round when the buffer is empty (two with screening).
        idle_rounds = (1 if self.screen_n is None else 2) if self.method == "pilot_commit" else 0
        productive_rounds = self.max_num_gen_batches - idle_rounds
        if self.max_num_gen_batches > 0 and self.gen_batch_size * productive_rounds < self.train_batch_size:
            raise PCConfigError(
                f"data.gen_batch_size={self.gen_batch_size} over max_num_gen_batches={self.max_num_gen_batches} "
                f"rounds cannot supply data.train_batch_size={self.train_batch_size} prompts even if every prompt "
                "passed; raise data.gen_batch_size or the round limit"
            )
        if self.n_pilot < 1:
            raise PCConfigError(f"algorithm.exploration.n={self.n_pilot} must be at least 1")
        if not 1 <= self.n_pilot_effective <= self.n_pilot:
            raise PCConfigError(
                f"algorithm.exploration.n_effective={self.n_pilot_effective} must lie in "
                f"[1, algorithm.exploration.n={self.n_pilot}]: only generated pilot rollouts can be reused"
            )
        if self.n_commit < 1:
            raise PCConfigError(f"actor_rollout_ref.rollout.n={self.n_commit} (commit rollouts) must be at least 1")
        if self.screen_n is not None and self.method != "pilot_commit":
            raise PCConfigError(
                f"algorithm.exploration.screen_n={self.screen_n} screens pilots, which only "
                f"algorithm.rollout_allocation=pilot_commit runs (not {self.method!r}); set it to null"
            )
        if self.screen_n is not None and not 2 <= self.screen_n < self.n_pilot:
            raise PCConfigError(
                f"algorithm.exploration.screen_n={self.screen_n} must lie in [2, algorithm.exploration.n="
                f"{self.n_pilot}): a screen needs two rollouts to disagree and must leave some of the pilot"
            )
        if self.downsample_n is not None and self.downsample_n < self.n_commit:
            raise PCConfigError(
                f"algorithm.downsample.n={self.downsample_n} must be at least actor_rollout_ref.rollout.n="
                f"{self.n_commit}: it is the rollouts generated, of which rollout.n are trained (null: off)"
            )
        if not 0.0 < self.skip_explore_floor <= 1.0:
            raise PCConfigError(
                f"algorithm.skip.explore_floor={self.skip_explore_floor} must lie in (0, 1]: it is the least "
                "probability that a skippable prompt is tried again"
            )
        if not 0.0 < self.skip_p_min <= self.skip_p_init <= self.skip_p_max <= 1.0:
            raise PCConfigError(
                f"algorithm.skip.p_min={self.skip_p_min}, algorithm.skip.p_init={self.skip_p_init} and "
                f"algorithm.skip.p_max={self.skip_p_max} must satisfy 0 < p_min <= p_init <= p_max <= 1"
            )
        if not 0.0 <= self.skip_p_step <= 1.0:
            raise PCConfigError(f"algorithm.skip.p_step={self.skip_p_step} must lie in [0, 1]")
        if not 0.0 <= self.skip_target_zero_variance <= 1.0:
            raise PCConfigError(
                f"algorithm.skip.target_zero_variance={self.skip_target_zero_variance} must lie in [0, 1]"
            )
        if self.train_batch_size < 1 or self.gen_batch_size < 1:
            raise PCConfigError(
                f"data.train_batch_size={self.train_batch_size} and data.gen_batch_size={self.gen_batch_size} "
                "must be positive"
            )
        if self.buffer_size < self.train_batch_size:
            raise PCConfigError(
                f"algorithm.buffer_size={self.buffer_size} is below data.train_batch_size={self.train_batch_size}: "
                "a step could never be filled from the buffer"
            )
        if self.buffer_max_off_steps < 0:
            raise PCConfigError(f"algorithm.buffer_max_off_steps={self.buffer_max_off_steps} must be >= 0")
        if self.prompt_strategy not in PROMPT_STRATEGIES:
            raise PCConfigError(
                f"algorithm.buffer_sampling_method={self.prompt_strategy!r}; choose one of {PROMPT_STRATEGIES}"
            )
        if self.response_strategy not in RESPONSE_STRATEGIES:
            raise PCConfigError(
                f"algorithm.buffer_response_sampling_method={self.response_strategy!r}; "
                f"choose one of {RESPONSE_STRATEGIES}"
            )

    @property
    def mini_batch_multiplier(self) -> int:
        """Rows per ``ppo_mini_batch_size`` unit: rollout.n (verl's and the reference's rule) or the group size."""
        return self.group_size if self.mini_batch_unit == "group" else self.n_commit

    def trainable_unit(self, dp_size: int, ppo_mini_batch_size: int, micro: MicroBatches | None = None) -> int:
        """Smallest prompt count whose rows split over the ranks, into whole PPO mini-batches and, per rank,
        into whole log-prob micro-batches: an unfilled batch is cut to a multiple of it, so it always splits.

        A large micro size makes this unit larger (up to the whole batch, when no unfilled batch trains)
        rather than being refused: the full batch is what ``check_parallel_sizes`` requires to split.
        """
        rows_unit = math.lcm(ppo_mini_batch_size * self.mini_batch_multiplier, dp_size)
        if self.partial_mini_batch:  # a partial last mini-batch is allowed: only the ranks constrain the rows
            rows_unit = dp_size
        for m in (micro or MicroBatches()).set_step():
            rows_unit = math.lcm(rows_unit, m.dp_size * m.size)
        return rows_unit // math.gcd(rows_unit, self.group_size)

    def check_parallel_sizes(self, dp_size: int, ppo_mini_batch_size: int, micro: MicroBatches | None = None) -> None:
        """The trained batch must split evenly over data-parallel ranks, PPO mini-batches and micro-batches.

        verl 0.9.1 sizes a mini-batch as ``ppo_mini_batch_size * rollout.n`` rows (for Pilot-Commit
        rollout.n is the commit count, as in the reference) and asserts that it divides each rank's
        rows; ``algorithm.mini_batch_unit=group`` counts whole training groups instead. With dynamic
        batch sizes off, its engine also asserts that each rank's rows of a log-prob call and of a
        mini-batch split into whole micro-batches (``prepare_micro_batches``); unfilled batches are
        cut to ``trainable_unit``, which accounts for that, so only the full batch is checked here.
        """
        if ppo_mini_batch_size < 1:
            raise PCConfigError(f"actor_rollout_ref.actor.ppo_mini_batch_size={ppo_mini_batch_size} must be at least 1")
        rows = self.train_rows
        mult = self.mini_batch_multiplier
        mini_rows = ppo_mini_batch_size * mult
        if rows % dp_size:
            raise PCConfigError(
                f"a step trains data.train_batch_size * group size = {rows} rows{self._downsample_note()}, "
                f"which does not split over {dp_size} data-parallel ranks"
            )
        if mini_rows % dp_size:
            raise PCConfigError(
                f"actor_rollout_ref.actor.ppo_mini_batch_size={ppo_mini_batch_size} gives mini-batches of "
                f"{ppo_mini_batch_size} * {mult} = {mini_rows} rows, which do not split over {dp_size} ranks"
            )
        if not self.partial_mini_batch and (rows // dp_size) % (mini_rows // dp_size):
            raise PCConfigError(
                f"actor_rollout_ref.actor.ppo_mini_batch_size={ppo_mini_batch_size} gives mini-batches of "
                f"{ppo_mini_batch_size} * {mult} = {mini_rows} rows "
                f"(algorithm.mini_batch_unit={self.mini_batch_unit}), which must divide the {rows} trained rows"
                f"{self._downsample_note()} "
                f"per step evenly across {dp_size} ranks; pick ppo_mini_batch_size so that {rows} is a "
                f"multiple of ppo_mini_batch_size * {mult}, or set algorithm.mini_batch_unit=group "
                "(or algorithm.partial_mini_batch=true for the reference's partial last mini-batch)"
            )
        micro = micro or MicroBatches()
        whole = (
            f"data.train_batch_size * group size = {self.train_batch_size} * {self.group_size} = {rows} rows a step"
            f"{self._downsample_note()}"
        )
        for m in micro.set_step():
            if rows % m.dp_size:
                raise PCConfigError(f"{whole} do not split over {m.dp_size} data-parallel ranks ({m.key})")
            m.check_divides(rows // m.dp_size, f"{whole} / {m.dp_size} ranks = {rows // m.dp_size} rows per rank")
        if micro.update is not None and micro.update.size is not None:
            per_rank = mini_rows // dp_size
            # The reference preset pads each rank's partial mini-batch to a whole one, so this covers it too.
            micro.update.check_divides(
                per_rank,
                f"PPO mini-batches of actor_rollout_ref.actor.ppo_mini_batch_size * {mult} = "
                f"{ppo_mini_batch_size} * {mult} = {mini_rows} rows / {dp_size} ranks = {per_rank} rows per rank",
            )

    def _downsample_note(self) -> str:
        """With down-sampling the trained group counts the kept rollouts, not the generated ones: say so."""
        if self.downsample_n is None:
            return ""
        return (
            f" (a trained group keeps rollout.n={self.n_commit} of the algorithm.downsample.n={self.downsample_n} "
            "generated rollouts)"
        )


@dataclass(frozen=True)
class MicroBatch:
    """A per-GPU micro-batch size (``key``) splitting the rows that each of ``dp_size`` ranks gets; None: unset."""

    key: str
    size: int | None
    dp_size: int

    def check_divides(self, rows_per_rank: int, arithmetic: str) -> None:
        if rows_per_rank % self.size:
            works = max(d for d in range(1, min(self.size, rows_per_rank) + 1) if rows_per_rank % d == 0)
            raise PCConfigError(
                f"{self.key}={self.size} does not divide {arithmetic}: verl asserts each rank's rows split into "
                f"whole micro-batches when dynamic batch sizes are off; set {self.key}={works} (a divisor of "
                f"{rows_per_rank}) or turn dynamic batch sizes on"
            )


@dataclass(frozen=True)
class MicroBatches:
    """The micro-batch sizes verl 0.9.1's engine splits by count (those with dynamic batch sizes on are left out).

    ``step``: calls on a step's whole batch (old log-probs; reference log-probs with a separate reference model);
    ``update``: each PPO mini-batch of the actor update.
    """

    step: tuple[MicroBatch, ...] = ()
    update: MicroBatch | None = None

    def set_step(self) -> list[MicroBatch]:
        return [m for m in self.step if m.size is not None]


def micro_batches(config, actor_dp: int, ref_dp: int | None) -> MicroBatches:
    """The micro-batch sizes of ``config``; ``ref_dp``: the reference model's ranks, or None without a separate
    reference model (none, or a LoRA actor run without its adapter, which uses the log-prob size)."""
    prefix = "actor_rollout_ref"
    actor_dynamic = OmegaConf.select(config, f"{prefix}.actor.use_dynamic_bsz", default=False)
    log_prob_dynamic = OmegaConf.select(config, f"{prefix}.rollout.log_prob_use_dynamic_bsz", default=actor_dynamic)
    if bool(actor_dynamic) != bool(log_prob_dynamic):
        # verl asserts this when the actor worker starts; say so before the cluster does.
        raise PCConfigError(
            f"{prefix}.actor.use_dynamic_bsz={actor_dynamic} and {prefix}.rollout.log_prob_use_dynamic_bsz="
            f"{log_prob_dynamic} must agree: verl's actor worker runs both with one engine setting"
        )

    def entry(key: str, dp_size: int) -> MicroBatch:
        return MicroBatch(key, _strict(key, OmegaConf.select(config, key, default=None), int | None), dp_size)

    step = []
    update = None
    if not actor_dynamic:
        update = entry(f"{prefix}.actor.ppo_micro_batch_size_per_gpu", actor_dp)
        step.append(entry(f"{prefix}.rollout.log_prob_micro_batch_size_per_gpu", actor_dp))
    if ref_dp is not None and not OmegaConf.select(config, f"{prefix}.ref.log_prob_use_dynamic_bsz", default=False):
        step.append(entry(f"{prefix}.ref.log_prob_micro_batch_size_per_gpu", ref_dp))
    for m in (*step, update):
        if m is not None and m.size is not None and m.size < 1:
            raise PCConfigError(f"{m.key}={m.size} must be at least 1")
    return MicroBatches(tuple(step), update)


def check_partial_mini_batch(actor) -> None:
    """algorithm.partial_mini_batch weights the last mini-batch through a token-mean loss over rows in order."""
    if actor.get("loss_agg_mode", "token-mean") != "token-mean":
        raise PCConfigError(
            f"algorithm.partial_mini_batch=true needs actor_rollout_ref.actor.loss_agg_mode=token-mean "
            f"(got {actor.loss_agg_mode!r}): the partial mini-batch's weight is set for a token-mean loss"
        )
    if actor.get("shuffle", False):
        raise PCConfigError(
            "algorithm.partial_mini_batch=true needs actor_rollout_ref.actor.shuffle=false: shuffling would move "
            "the padding rows out of the last mini-batch"
        )
    # Only the policy-gradient term is weighted (through the advantages): terms that do not scale with the
    # advantage would keep full weight in the partial mini-batch.
    if actor.get("use_kl_loss", False):
        raise PCConfigError(
            "algorithm.partial_mini_batch=true needs actor_rollout_ref.actor.use_kl_loss=false: the KL loss term "
            "of the partial mini-batch would not be weighted by its share of rows"
        )
    if float(actor.get("entropy_coeff", 0) or 0) != 0:
        raise PCConfigError(
            f"algorithm.partial_mini_batch=true needs actor_rollout_ref.actor.entropy_coeff=0 (got "
            f"{actor.entropy_coeff}): the entropy term of the partial mini-batch would not be weighted"
        )
    loss_mode = OmegaConf.select(actor, "policy_loss.loss_mode", default="vanilla")
    if loss_mode != "vanilla":
        raise PCConfigError(
            f"algorithm.partial_mini_batch=true needs actor_rollout_ref.actor.policy_loss.loss_mode=vanilla (got "
            f"{loss_mode!r}): the weighting relies on the clipped PPO loss scaling with the advantage"
        )
