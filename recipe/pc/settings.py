"""The Pilot-Commit keys of the Hydra config, read once and checked with errors that name the key."""

from __future__ import annotations

import math
from dataclasses import dataclass

from recipe.pc.replay_buffer import PROMPT_STRATEGIES, RESPONSE_STRATEGIES, TIE_ORDERS

METHODS = ("pilot_commit", "grpo", "dapo")
DAPO_STEP_UNITS = ("update", "round")


class PCConfigError(ValueError):
    """A Pilot-Commit config value that cannot work; the message names the key and a fix."""


@dataclass(frozen=True)
class PCSettings:
    method: str  # pilot_commit, or a baseline on the same loop: grpo | dapo
    train_batch_size: int  # B: prompts per optimizer step
    gen_batch_size: int  # G: pilot prompts per round
    n_pilot: int
    n_pilot_effective: int  # pilot rollouts reused in a training group
    n_commit: int
    p_lower: float
    p_upper: float
    evict_threshold: float | None
    agg_metric: str  # the band's metric (pilot_commit) or the group filter's metric (dapo)
    max_num_gen_batches: int  # <= 0: unlimited rounds per step
    buffer_size: int
    buffer_max_off_steps: int
    prompt_strategy: str
    response_strategy: str
    seed: int
    mini_batch_unit: str  # rollout_n: ppo_mini_batch_size x rollout.n rows (reference); group: x group size
    carry_over_epoch: bool  # keep the buffer and a partial batch across an epoch boundary
    min_train_prompts: int | None  # train a batch unfilled after max_num_gen_batches rounds if it has this many
    raise_on_unfilled_batch: bool  # ... or stop with an error instead
    # --- reference-preset keys (issue #11) ---
    partial_mini_batch: bool = False  # a step may end in a partial PPO mini-batch, weighted by its share of rows
    dapo_step_unit: str = "update"  # DAPO: total_training_steps counts optimizer steps (update) or rounds (round)
    buffer_tie_order: str = "newest_first"  # max_variance ties on (std, step): newest_first | oldest_first

    @property
    def group_size(self) -> int:
        """Rows per trained prompt: reused pilots + commits, or rollout.n for the baselines."""
        if self.method == "pilot_commit":
            return self.n_pilot_effective + self.n_commit
        return self.n_commit

    @property
    def train_rows(self) -> int:
        return self.train_batch_size * self.group_size

    @classmethod
    def from_config(cls, config) -> PCSettings:
        algo, data = config.algorithm, config.data
        rollout_n = int(config.actor_rollout_ref.rollout.n)
        n_pilot = int(algo.exploration.n)
        n_eff = algo.exploration.get("n_effective", None)
        n_eff = n_pilot if n_eff is None else int(n_eff)
        seed = algo.get("seed", None)
        if seed is None:
            seed = data.get("seed", None)
        method = str(algo.get("rollout_allocation", "pilot_commit"))
        # DAPO keeps verl's own filter_groups keys for its metric and round limit.
        agg_metric, max_rounds = str(algo.agg_metric), int(algo.max_num_gen_batches)
        if method == "dapo":
            agg_metric = str(algo.filter_groups.metric)
            max_rounds = int(algo.filter_groups.max_num_gen_batches)
        settings = cls(
            method=method,
            train_batch_size=int(data.train_batch_size),
            gen_batch_size=int(data.get("gen_batch_size", None) or data.train_batch_size),
            n_pilot=n_pilot,
            n_pilot_effective=n_eff,
            n_commit=rollout_n,
            p_lower=float(algo.diversity_threshold_lower),
            p_upper=float(algo.diversity_threshold_upper),
            evict_threshold=None if algo.exclude_threshold_upper is None else float(algo.exclude_threshold_upper),
            agg_metric=agg_metric,
            max_num_gen_batches=max_rounds,
            buffer_size=int(algo.buffer_size),
            buffer_max_off_steps=int(algo.buffer_max_off_steps),
            prompt_strategy=str(algo.buffer_sampling_method),
            response_strategy=str(algo.buffer_response_sampling_method),
            seed=0 if seed is None else int(seed),
            mini_batch_unit=str(algo.get("mini_batch_unit", "rollout_n")),
            carry_over_epoch=bool(algo.get("carry_over_epoch", True)),
            min_train_prompts=None if algo.get("min_train_prompts") is None else int(algo.min_train_prompts),
            raise_on_unfilled_batch=bool(algo.get("raise_on_unfilled_batch", False)),
            # --- reference-preset keys (issue #11) ---
            partial_mini_batch=bool(algo.get("partial_mini_batch", False)),
            dapo_step_unit=str(algo.get("dapo_step_unit", "update")),
            buffer_tie_order=str(algo.get("buffer_tie_order", "newest_first")),
        )
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
        # Pilot-Commit commits nothing in a step's first round when the buffer is empty.
        productive_rounds = self.max_num_gen_batches - (1 if self.method == "pilot_commit" else 0)
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

    def trainable_unit(self, dp_size: int, ppo_mini_batch_size: int) -> int:
        """Smallest prompt count whose rows split over the ranks and into whole PPO mini-batches."""
        rows_unit = math.lcm(ppo_mini_batch_size * self.mini_batch_multiplier, dp_size)
        if self.partial_mini_batch:  # a partial last mini-batch is allowed: only the ranks constrain the rows
            rows_unit = dp_size
        return rows_unit // math.gcd(rows_unit, self.group_size)

    def check_parallel_sizes(self, dp_size: int, ppo_mini_batch_size: int) -> None:
        """The trained batch must split evenly over data-parallel ranks and PPO mini-batches.

        verl 0.9.1 sizes a mini-batch as ``ppo_mini_batch_size * rollout.n`` rows (for Pilot-Commit
        rollout.n is the commit count, as in the reference) and asserts that it divides each rank's
        rows; ``algorithm.mini_batch_unit=group`` counts whole training groups instead.
        """
        rows = self.train_rows
        mult = self.mini_batch_multiplier
        mini_rows = ppo_mini_batch_size * mult
        if rows % dp_size:
            raise PCConfigError(
                f"a step trains data.train_batch_size * group size = {rows} rows, "
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
                f"(algorithm.mini_batch_unit={self.mini_batch_unit}), which must divide the {rows} trained rows "
                f"per step evenly across {dp_size} ranks; pick ppo_mini_batch_size so that {rows} is a "
                f"multiple of ppo_mini_batch_size * {mult}, or set algorithm.mini_batch_unit=group "
                "(or algorithm.partial_mini_batch=true for the reference's partial last mini-batch)"
            )


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
