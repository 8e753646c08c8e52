"""What a run will do, in a few lines to check before spending GPU time: the summary that the dry run
(``python -m recipe.pc.main_pc --validate``, ``DRY_RUN=1`` in the launchers) prints once the start-up checks pass.

Arithmetic on the composed config: no Ray, no GPU. It reads the train files' parquet footers, a local model folder's
safetensors headers (no row, no weight) and the variables the launchers export for verl's loggers.
"""

from __future__ import annotations

import bisect
import glob
import json
import math
import os
from dataclasses import dataclass

from omegaconf import OmegaConf

from recipe.pc.allocation import generated_per_group
from recipe.pc.allocators.dapo import DAPOSettings
from recipe.pc.allocators.knapsack import KnapsackSettings
from recipe.pc.settings import PCSettings
from recipe.pc.startup_checks import actor_dp_size, train_rows

HEADER = "dry run: what this run will do"
# The estimates' share of filtered candidates that pass (PC and knapsack: pilots in the band; DAPO: groups whose
# rollouts disagree), unless PASS_SHARE gives one. The regime study's runs logged 0.12-0.36 (docs/tools.md); a run's
# own is its logged filtering_stats/pass_rate.
ASSUMED_PASS_SHARE = 0.25
PASS_SHARE_VAR = "PASS_SHARE"


def pass_share_from(environ) -> float:
    """The share the estimates assume: ``PASS_SHARE`` when set, else ``ASSUMED_PASS_SHARE``; ValueError naming the
    variable when it is not a share in (0, 1]."""
    text = environ.get(PASS_SHARE_VAR)
    if text is None or not text.strip():
        return ASSUMED_PASS_SHARE
    try:
        share = float(text)
    except ValueError:
        share = math.nan
    if not 0 < share <= 1:
        raise ValueError(
            f"{PASS_SHARE_VAR}={text} must be a share in (0, 1], e.g. 0.3 for 30% of the pilots in the band; unset it "
            f"for the default {ASSUMED_PASS_SHARE:g}"
        )
    return share


# Adam keeps two moments a parameter, in the parameters' dtype.
ADAM_OPTIMIZERS = ("adam", "adamw")
PILOT_ALLOCATORS = ("pilot_commit", "knapsack")


@dataclass(frozen=True)
class Steps:
    """How many steps the run makes (DAPO with ``dapo_step_unit=round``: rounds), as far as the config tells."""

    count: int | None  # None: unknown
    exact: bool  # the run makes count steps (unless stopped); False: at most count, the data may end first
    unit: str  # steps | rounds
    line: str


@dataclass(frozen=True)
class Rollouts:
    """Generated rollouts a step and in all: exact, or a minimum and an estimate."""

    lines: list[str]
    per_step: int | None  # exact rollouts a step (GRPO), else None


def summary(config, environ=os.environ) -> list[str]:
    """The dry run's summary of a config that passed the start-up checks, one line an entry; the estimates assume
    ``PASS_SHARE`` of ``environ`` (``pass_share_from``)."""
    pass_share = pass_share_from(environ)
    pc = PCSettings.from_config(config)
    trainer = config.trainer
    steps = run_steps(config, pc, pass_share)
    rollouts = rollout_lines(pc, steps, pass_share)
    return [
        f"{HEADER} ({trainer.project_name}/{trainer.experiment_name})",
        _entry("GPUs", _gpus(config)),
        _entry("allocator", _allocator(pc)),
        _entry("prompts", _prompts(pc)),
        _entry("steps", steps.line),
        *rollouts.lines,
        _entry("validation", _validation(config, pc, steps, rollouts.per_step)),
        *_checkpoints(config, steps),
        *_buffer(config, pc, pass_share),
        _entry("logs", _logs(config, environ)),
    ]


def _entry(label: str, text: str) -> str:
    return f"  {label:<12}{text}"


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def _gpus(config) -> str:
    nodes, per_node = int(config.trainer.nnodes), int(config.trainer.n_gpus_per_node)
    tp = config.actor_rollout_ref.rollout.tensor_model_parallel_size
    return (
        f"{_plural(nodes, 'node')} × {_plural(per_node, 'GPU')} = {nodes * per_node:,}; actor data parallel "
        f"{actor_dp_size(config):,}, rollout tensor parallel {tp}"
    )


# ---------------------------------------------------------------------- what a step generates
def _allocator(pc: PCSettings) -> str:
    n, c, sampled = pc.pilot.n, pc.n_commit, generated_per_group(pc)
    kept = "" if sampled == c else f" (generates {sampled:,}, trains the {c:,} most varied)"
    if pc.method == "grpo":
        return f"grpo: a group of {c:,} rollouts (rollout.n) for each prompt{kept}, every group trained"
    if pc.method == "dapo":
        rounds = f"at most {pc.max_num_gen_batches}" if pc.max_num_gen_batches > 0 else "any number of"
        unit = "; trainer.total_training_steps counts rounds" if pc.group(DAPOSettings).step_unit == "round" else ""
        return f"dapo: groups of {c:,} (rollout.n){kept}, kept when they vary; {rounds} rounds a step{unit}"
    screen = "" if pc.pilot.screen_n is None else f", {pc.pilot.screen_n} of them first as a screen"
    reused = "" if pc.pilot.n_effective == n else f" (reusing {pc.pilot.n_effective} of the pilots)"
    if pc.method == "pilot_commit":
        pilots, commits = f"pilots of {n} (exploration.n) a new prompt{screen}", f"commits of {c} (rollout.n){kept}"
        groups = f"groups of {pc.pilot.n_effective} + {c} = {pc.group_size}{reused}"
        return f"pilot_commit: {pilots}, {commits} a buffered prompt; {groups}"
    if pc.method == "knapsack":
        k = pc.group(KnapsackSettings)
        low, high = pc.allocator.group_size_range(pc)
        return (
            f"knapsack: pilots of {n} (exploration.n) a new prompt; commits of {k.min_commit} to {k.max_commit} in "
            f"steps of {k.unit} (algorithm.knapsack.*), {c} (rollout.n) on average; groups of {low} to {high}{reused}"
        )
    return f"{pc.method}: groups of {pc.group_size} (an allocator of yours: no rollout counts below)"


def _prompts(pc: PCSettings) -> str:
    trained = f"{pc.train_batch_size:,} trained a step (data.train_batch_size)"
    if pc.method == "grpo":
        return trained
    return f"{trained}; {pc.gen_batch_size:,} new a round (data.gen_batch_size)"


def run_steps(config, pc: PCSettings, pass_share: float = ASSUMED_PASS_SHARE) -> Steps:
    """trainer.total_training_steps, bounded by what the data holds: verl's count, epochs × whole rounds an epoch.
    A filtering allocator's step count is exact only where the data holds the rounds the estimate needs."""
    unit = "rounds" if pc.method == "dapo" and pc.group(DAPOSettings).step_unit == "round" else "steps"
    counted = train_rows(config)
    epochs, set_steps = int(config.trainer.total_epochs), config.trainer.total_training_steps
    if counted is None:
        if set_steps is None:
            return Steps(
                None,
                False,
                unit,
                "unknown: trainer.total_training_steps is null and the train rows cannot be read here",
            )
        return Steps(set_steps, True, unit, f"{set_steps:,} {unit} (trainer.total_training_steps)")
    _, usable = counted
    rounds = usable // pc.gen_batch_size * epochs
    filtered = " before data.filter_overlong_prompts" if config.data.get("filter_overlong_prompts") else ""
    held = (
        f"{_plural(epochs, 'epoch')} × {usable:,} rows{filtered} // {pc.gen_batch_size:,} a round = {rounds:,} rounds"
    )
    # A GRPO round is a step unless a prompt filter leaves prompts out; a filtering allocator's step takes one round
    # or more.
    one_round_a_step = pc.method == "grpo" and pc.prompt_filter_name == "all"
    if set_steps is not None and rounds >= least_rounds(pc, set_steps, unit):
        text = f"{set_steps:,} {unit} (trainer.total_training_steps); {held}"
        needed = estimated_rounds(pc, set_steps, unit, pass_share)
        if one_round_a_step or rounds >= needed:
            return Steps(set_steps, not filtered, unit, text)
        return Steps(set_steps, False, unit, f"at most {text}; the estimate needs {needed:,}: the data may end first")
    # The most steps the rounds can hold (below trainer.total_training_steps, which needs more).
    most = bisect.bisect_right(range(rounds + 1), rounds, key=lambda t: least_rounds(pc, t, unit)) - 1
    exact = one_round_a_step and not filtered
    why = "the data ends first" if set_steps is not None else "trainer.total_training_steps is null"
    return Steps(most, exact, unit, f"{'' if exact else 'at most '}{most:,} {unit}: {why} ({held})")


def least_rounds(pc: PCSettings, steps: int, unit: str = "steps") -> int:
    """The fewest rounds that ``steps`` steps take: one a step at least, and every trained prompt a new prompt of some
    round (G a round); a pilot allocator's first step starts with a round that commits nothing."""
    if unit == "rounds":
        return steps
    # A round's commits are drawn before its own pilots, so the idle first round adds to either bound.
    idle = pc.allocator.idle_rounds(pc) if pc.method in PILOT_ALLOCATORS else 0
    return max(steps, math.ceil(steps * pc.train_batch_size / pc.gen_batch_size)) + idle


def rounds_a_step(pc: PCSettings, pass_share: float) -> float:
    """The estimate's rounds a step: enough rounds for ``train_batch_size`` passing prompts at ``pass_share``, at
    least the fewest that can hold them, at most ``max_num_gen_batches``."""
    B, G = pc.train_batch_size, pc.gen_batch_size
    limit = pc.max_num_gen_batches if pc.max_num_gen_batches > 0 else math.inf  # then a step trains on what it has
    fewest = math.ceil(B / G) if pc.method == "dapo" else 1
    return min(max(B / (pass_share * G), fewest), limit)


def estimated_rounds(pc: PCSettings, steps: int, unit: str, pass_share: float) -> int:
    """The rounds ``steps`` steps take at the estimate (GRPO: one a step), the idle first round included."""
    if unit == "rounds" or pc.method == "grpo":
        return steps
    idle = pc.allocator.idle_rounds(pc) if pc.method in PILOT_ALLOCATORS else 0
    return math.ceil(steps * rounds_a_step(pc, pass_share)) + idle


def rollout_lines(pc: PCSettings, steps: Steps, pass_share: float) -> Rollouts:
    """GRPO's rollouts exactly; the filtering allocators' as a minimum and an estimate at ``pass_share``."""
    B, G, sampled = pc.train_batch_size, pc.gen_batch_size, generated_per_group(pc)
    T = steps.count
    if pc.method == "grpo":
        per_step = B * sampled
        total = "unknown steps" if T is None else f"{'' if steps.exact else 'at most '}{T * per_step:,}"
        return Rollouts([_entry("rollouts", f"{per_step:,} a step ({B:,} × {sampled:,}); in all: {total}")], per_step)
    rounds = rounds_a_step(pc, pass_share)
    pace = f"{rounds:.2f} rounds a step; {PASS_SHARE_VAR}={pass_share:g}"
    if pc.method == "dapo":
        fewest = math.ceil(B / G)
        per_round = G * sampled
        least, least_text = fewest * per_round, f"{fewest} × {G:,} prompts × {sampled:,}"
        estimate = rounds * per_round
        assumed = f"if {pass_share:.0%} of the groups vary ({pace})"
        if T is None:
            in_all = "unknown steps"
        elif steps.unit == "rounds":  # the run is T rounds, whatever its steps
            in_all = f"at least {T * per_round:,}: {T:,} rounds × {G:,} × {sampled:,}"
        else:
            in_all = f"at least {least_rounds(pc, T) * per_round:,}; estimate {round(T * estimate):,}"
    elif pc.method in PILOT_ALLOCATORS:
        pilot = pc.pilot.n if pc.pilot.screen_n is None else pc.pilot.screen_n  # a screen that agrees ends a pilot
        commits = B * sampled
        least, least_text = G * pilot + commits, f"a round of {G:,} × {pilot} pilots, {B:,} × {sampled:,} commits"
        estimate = rounds * G * pc.pilot.n + commits
        assumed = f"if {pass_share:.0%} of the pilots land in the band ({pace})"
        if pc.pilot.screen_n is not None:
            assumed += ", screened pilots counted whole"
        if T is None:
            in_all = "unknown steps"
        else:
            idle = pc.allocator.idle_rounds(pc)  # step 1 starts with an empty buffer
            in_all = (
                f"at least {least_rounds(pc, T) * G * pilot + T * commits:,}; "
                f"estimate {round((T * rounds + idle) * G * pc.pilot.n + T * commits):,}"
            )
    else:
        return Rollouts([], None)
    if T is not None and not steps.exact:
        in_all += f", if all {T:,} {steps.unit} run"
    return Rollouts(
        [
            _entry("rollouts", f"at least {least:,} a step ({least_text})"),
            _entry("", f"estimate {round(estimate):,} a step, {assumed}"),
            _entry("", f"in all: {in_all}"),
        ],
        None,
    )


# ---------------------------------------------------------------------- validation, checkpoints, logs
def _every(freq: int, last: int) -> list[int]:
    """The steps of a rule "every ``freq`` steps and at the last" in a run of ``last`` steps."""
    return sorted({*range(freq, last + 1, freq), last})


def _validation(config, pc: PCSettings, steps: Steps, per_step: int | None) -> str:
    """verl's rule (every trainer.test_freq steps and the last), the rollout budgets, and the one before training."""
    before = bool(config.trainer.get("val_before_train", True))
    freq, interval = int(config.trainer.test_freq), pc.val_rollout_interval
    last = _optimizer_steps(steps)
    parts = ["before training"] if before else []
    if freq > 0:
        parts.append(f"every {freq} steps and at the last")
    at_last = "" if freq > 0 else " and at the last"  # either rule validates the last step
    if interval is not None and per_step is None:
        parts.append(
            f"at the first step past each {interval:,} generated rollouts (which step depends on the pass rates)"
            f"{at_last}"
        )
    elif interval is not None:
        crossed = [] if last is None else _budget_steps(interval, per_step, last)
        shown = ", ".join(map(str, crossed[:5])) + (", …" if len(crossed) > 5 else "")
        parts.append(f"at each {interval:,} generated rollouts" + (f" (steps {shown})" if crossed else "") + at_last)
    if freq <= 0 and interval is None:
        parts.append("none during training (trainer.test_freq and trainer.val_rollout_interval are off)")
    text = "; ".join(parts)
    if last is not None and (per_step is not None or interval is None):
        during = set(_every(freq, last)) if freq > 0 else set()
        if interval is not None:
            during |= {*_budget_steps(interval, per_step, last), last}
        text += f": {'' if steps.exact else 'at most '}{_plural(len(during) + before, 'validation')}"
    return text


def _optimizer_steps(steps: Steps) -> int | None:
    """The run's optimizer steps, which validation and checkpoints count; unknown when the run counts rounds."""
    return steps.count if steps.unit == "steps" else None


def _budget_steps(interval: int, per_step: int, last: int) -> list[int]:
    """The steps at which a run of ``per_step`` rollouts a step reaches a new multiple of ``interval``."""
    return [s for s in range(1, last + 1) if s * per_step // interval > (s - 1) * per_step // interval]


def _checkpoints(config, steps: Steps) -> list[str]:
    trainer = config.trainer
    freq = int(trainer.save_freq)
    if freq <= 0:
        return [_entry("checkpoints", f"none (trainer.save_freq={freq}): a stopped run cannot resume")]
    keep = trainer.get("max_actor_ckpt_to_keep")
    keep = keep if isinstance(keep, int) and keep > 0 else None
    last = _optimizer_steps(steps)
    saved = None if last is None else len(_every(freq, last))
    # verl deletes the oldest before a save when it keeps 2 or more, after the save when it keeps 1.
    peak = None if keep is None else (2 if keep == 1 else keep)
    on_disk = saved if peak is None else (peak if saved is None else min(saved, peak))
    count = "" if saved is None else f": {'' if steps.exact else 'at most '}{saved:,}"
    kept = "all kept" if keep is None else f"the last {keep} kept (trainer.max_actor_ckpt_to_keep)"
    lines = [
        _entry("checkpoints", f"every {freq} steps and at the last{count}; {kept}; in {trainer.default_local_dir}")
    ]
    per_param, what = checkpoint_bytes_per_parameter(config.actor_rollout_ref.actor)
    params, unknown = model_parameters(str(config.actor_rollout_ref.model.path))
    if params is None:
        return [*lines, _entry("disk", f"model size unknown: {unknown}")]
    each = params * per_param
    total = (
        ""
        if on_disk is None
        else f"; {_bytes(each * on_disk)} for the {_plural(on_disk, 'checkpoint')} on disk at once"
    )
    return [
        *lines,
        _entry("disk", f"{_bytes(each)} a checkpoint ({params:,} parameters × {per_param} bytes: {what}){total}"),
    ]


def _buffer(config, pc: PCSettings, pass_share: float) -> list[str]:
    """What a pilot allocator's saved pilot groups add to each checkpoint (its state file): the prompts that land in
    the band at the estimate while the staleness bound keeps them, as if none were committed (commits take about as
    many out, so a run saves less), and the knapsack's edges of the last round."""
    if pc.method not in PILOT_ALLOCATORS or int(config.trainer.save_freq) <= 0:
        return []
    inflow = rounds_a_step(pc, pass_share) * pass_share * pc.gen_batch_size
    kept = pc.buffer.max_off_steps + 1  # flushed once more than max_off_steps steps old
    held = min(math.ceil(inflow * kept), pc.buffer.size)
    if held == pc.buffer.size:
        why = "algorithm.buffer_size"
    else:
        why = f"{inflow:,.1f}".removesuffix(".0") + f" a step land in the band × {kept} steps kept, none committed"
    if pc.method == "knapsack":  # the last round's pilots outside the band wait for the next round's knapsack
        edges = math.ceil((1 - pass_share) * pc.gen_batch_size)
        held += edges
        why += f"; and {edges:,} of the last round's pilots outside the band"
    prompt, response = int(config.data.max_prompt_length), int(config.data.max_response_length)
    token = token_id_bytes(str(config.actor_rollout_ref.model.path))
    log_probs = bool(config.actor_rollout_ref.rollout.get("calculate_log_probs", True))
    each = buffered_prompt_bytes(prompt, response, pc.pilot.n, token, log_probs)
    stored = "ids, masks, log-probs" if log_probs else "ids, masks"
    tokens = f"{pc.pilot.n} pilots × ({prompt:,} + {response:,}) tokens: {stored}"
    return [
        _entry(
            "buffer",
            f"up to {_bytes(held * each)} a checkpoint: {_plural(held, 'pilot group')} ({why}) × {_bytes(each)} "
            f"({tokens}; per-row text not counted)",
        )
    ]


def buffered_prompt_bytes(prompt: int, response: int, pilots: int, token_bytes: int, log_probs: bool) -> int:
    """Bytes a buffered prompt's pilot group takes in a state file (``CompactRows``): the padded prompt's ids once,
    each pilot's response ids, attention mask (bool), rollout log-probs (float32) and reward (value and column)."""
    per_pilot = response * token_bytes + (prompt + response) + (4 * response if log_probs else 0) + 8
    return prompt * token_bytes + pilots * per_pilot


def token_id_bytes(path: str) -> int:
    """Bytes a stored token id takes: the narrowest integer holding the model's vocabulary (its ``config.json``),
    else int32's 4."""
    from recipe.pc.compact import int_dtype_for

    try:
        with open(os.path.join(os.path.expanduser(path), "config.json")) as f:
            vocab = int(json.load(f)["vocab_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return 4
    return int_dtype_for(0, vocab - 1).itemsize


def checkpoint_bytes_per_parameter(actor) -> tuple[int, str]:
    """Bytes a parameter takes in an actor checkpoint (verl's ``checkpoint.save_contents``), and what they hold."""
    from verl.utils.torch_dtypes import PrecisionType

    contents = list(actor.checkpoint.save_contents)
    dtype = OmegaConf.select(actor, "fsdp_config.model_dtype", default=None) or "fp32"  # verl trains in fp32 if null
    weight = PrecisionType.to_dtype(dtype).itemsize
    total, parts = 0, []
    if "model" in contents:
        total += weight
        parts.append(f"{dtype} weights")
    if "optimizer" in contents:
        optimizer = str(actor.optim.get("optimizer", "AdamW"))
        if optimizer.lower() in ADAM_OPTIMIZERS:
            total += 2 * weight
            parts.append(f"{optimizer}'s 2 moments")
        else:
            parts.append(f"{optimizer}'s state not counted")
    if "hf_model" in contents:  # verl hands save_pretrained the full state dict as trained, uncast
        total += weight
        parts.append(f"a {dtype} Hugging Face copy")
    return total, ", ".join(parts) or "nothing"


def model_parameters(path: str) -> tuple[int | None, str]:
    """The parameters of a local model folder, from its safetensors headers; else None and why not."""
    from safetensors import safe_open

    folder = os.path.expanduser(path)
    if not os.path.isdir(folder):
        return None, f"{path} is not a local folder: a hub id is not read in a dry run"
    files = sorted(glob.glob(os.path.join(folder, "*.safetensors")))
    if not files:
        return None, f"no *.safetensors in {path}"
    total = 0
    for name in files:
        try:
            with safe_open(name, framework="np") as f:
                total += sum(math.prod(f.get_slice(key).get_shape()) for key in f.keys())
        except Exception as err:
            return None, f"{os.path.basename(name)} cannot be read: {type(err).__name__}"
    return total, ""


def _bytes(count: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:,.1f} {unit}"
    return f"{int(count)} bytes"


def _logs(config, environ) -> str:
    trainer = config.trainer
    loggers = trainer.get("logger") or []
    loggers = [loggers] if isinstance(loggers, str) else list(loggers)
    project, experiment = trainer.project_name, trainer.experiment_name
    # Where verl's Tracking backends write (verl/utils/tracking.py: FileLogger, _TensorboardAdapter, wandb.init).
    shown = []
    for name in loggers:
        if name == "file":
            root = os.path.expanduser(environ.get("VERL_FILE_LOGGER_ROOT", "."))
            default = os.path.join(root, str(project), f"{experiment}.jsonl")
            shown.append(f"file {environ.get('VERL_FILE_LOGGER_PATH', default)}")
        elif name == "tensorboard":
            shown.append(f"tensorboard {environ.get('TENSORBOARD_DIR', f'tensorboard_log/{project}/{experiment}')}")
        elif name in ("wandb", "tracking"):
            shown.append(f"wandb project {project}, run {experiment}, WANDB_MODE={environ.get('WANDB_MODE', 'online')}")
        else:
            shown.append(str(name))
    for key, what in (("rollout_data_dir", "rollout dumps"), ("validation_data_dir", "validation dumps")):
        if trainer.get(key):
            shown.append(f"{what} {trainer.get(key)}")
    return "; ".join(shown) or "none (trainer.logger is empty)"
