"""The configurations ``plan`` compares (GRPO, DAPO and PC splits at one group size, and any registered allocator it
names), its tables of predictions and its recommendation, with what the recommendation's criterion does not
capture."""

from __future__ import annotations

import math

import numpy as np

from recipe.pc_tools.costmodel import DAPO, GRPO, PilotCommit, Prediction, Registered, compose_settings
from recipe.pc_tools.dumps import DumpError

# What the recommendation's criterion does not capture, as measured (docs/results/regimes/README.md).
CRITERION_CAVEAT = (
    "note: ranked by generated rollouts per informative group, not by learning per rollout; measured, no PC split "
    "reached GRPO's accuracy with fewer rollouts by a measured margin (docs/results/regimes/README.md): check with "
    "short runs"
)

# The regime study's ledger (docs/results/regimes/README.md; SmolLM2-135M, arithmetic, seeds' mean curves): PC's
# rollouts to reach GRPO's accuracy over GRPO's at the same group size, as (n_pilot, n_commit, screen_n, mix, times).
# Each split generated fewer rollouts per informative group than GRPO, the model's criterion, in those runs.
MEASURED_AGAINST_GRPO = (
    (4, 12, None, "default", 1.12),
    (4, 12, None, "calibrated", 1.56),
    (4, 12, None, "spread", 1.62),
    (4, 60, None, "default", 0.95),
    (4, 60, None, "calibrated", 0.83),
    (8, 56, None, "default", 0.99),
    (8, 56, None, "calibrated", 1.14),
    (16, 48, None, "default", 1.22),
    (16, 48, None, "calibrated", 1.24),
    (16, 48, 4, "calibrated", 0.97),
)
# Above this a split needed more rollouts than GRPO; up to it, two or three seeds without an interval do not say so.
PARITY = 1.05


def measured_ratios(config) -> list[tuple[str, float]]:
    """The regime study's (mix, PC's rollouts to reach GRPO's accuracy over GRPO's) for a PC split at any round size;
    none for any other configuration or a downsampled split (never measured)."""
    if not isinstance(config, PilotCommit) or config.downsample_n is not None:
        return []
    split = (config.n_pilot, config.n_commit, config.screen_n)
    return [(mix, times) for *measured, mix, times in MEASURED_AGAINST_GRPO if tuple(measured) == split]


def _ratios_text(config: PilotCommit, runs: list[tuple[str, float]]) -> str:
    ratios = ", ".join(f"{times:.2f}x ({mix} mix)" for mix, times in runs)
    return f"{ratios} GRPO n={config.n_pilot + config.n_commit}'s rollouts to reach GRPO's accuracy"


def measured_worse(config) -> str | None:
    """How a PC split (at any round size) needed more rollouts than GRPO to reach GRPO's accuracy when it was
    measured, or None: not measured, at most PARITY on every mix measured, or downsampled (never measured)."""
    runs = measured_ratios(config)
    if all(times <= PARITY for _, times in runs):
        return None
    return f"measured, it needed {_ratios_text(config, runs)} (docs/results/regimes/README.md)"


# Passes over the training set past which PC's eviction (at each pass's end, of the prompts its pilots solved) leaves
# harder prompts than the dump's pass rates: on 480 arithmetic prompts (47 and 56 passes by step 29) the model was
# 44-49% low, on 3,000 (under 2 passes in 30 steps) within 15% (docs/results/regimes/notebook.md, "480 prompts").
EVICTION_PASSES = 2.0


def eviction_notes(predictions: list[Prediction], configs: list, train_prompts: int, steps: int) -> list[str]:
    """A note for each PC configuration predicted to pass over ``train_prompts`` more than EVICTION_PASSES times
    in ``steps`` steps, where the model, which never evicts, predicts too few rounds."""
    notes = []
    for pred, config in zip(predictions, configs, strict=True):
        if not isinstance(config, PilotCommit) or not math.isfinite(pred.rounds_per_step):
            continue
        passes = pred.rounds_per_step * config.gen_batch_size * steps / train_prompts
        if passes > EVICTION_PASSES:
            notes.append(
                f"note: {pred.label}: {pred.rounds_per_step:.2f} rounds a step of {config.gen_batch_size} prompts "
                f"pass over the {train_prompts} training prompts {passes:.1f} times in {steps} steps. PC evicts the "
                "prompts its pilots solve at each pass's end and this model does not, so once the prompts left are "
                "mostly too hard expect more rounds than predicted (on 480 arithmetic prompts, 47 and 56 passes by "
                "step 29, it was 44-49% low: docs/results/regimes/notebook.md)"
            )
    return notes


def default_splits(group_size: int) -> list[tuple[int, int]]:
    """Pilot sizes 2, 4, 8, ... below the group size (and a quarter of it), the rest committed."""
    pilots = {2**k for k in range(1, int(math.log2(group_size)) + 1) if 2**k < group_size}
    if group_size >= 8:
        pilots.add(group_size // 4)
    return [(n_p, group_size - n_p) for n_p in sorted(pilots)]


def parse_splits(text: str) -> list[tuple[int, int]]:
    splits = []
    for part in text.split(","):
        pilot, plus, commit = part.strip().partition("+")
        if not (plus and pilot.isdigit() and commit.isdigit()):
            raise DumpError(f"expected splits like 4+12,8+8 (pilot+commit rollouts), got {text!r}")
        splits.append((int(pilot), int(commit)))
    return splits


def configurations(args) -> list:
    B, G, N = args.train_batch_size, args.gen_batch_size or 3 * args.train_batch_size, args.group_size
    splits = args.pc or default_splits(N)  # --pc: parsed by parse_splits
    if args.screen_n is not None and not args.pc:
        # A screen must be shorter than the pilot: the default grid keeps the splits it fits.
        splits = [(n_p, n_c) for n_p, n_c in splits if n_p > args.screen_n]
        if not splits:
            raise DumpError(f"--screen-n {args.screen_n}: no default split has a longer pilot; give --pc")
    ds = args.downsample_n
    configs = [GRPO(N, B, ds), DAPO(N, G, B, args.max_num_gen_batches, ds)]
    configs += [
        PilotCommit(
            n_p, n_c, G, B, args.p_lower, args.p_upper, args.max_off_steps, args.max_num_gen_batches, args.screen_n, ds
        )
        for n_p, n_c in splits
    ]
    return configs


def registered_configurations(args) -> list[Registered]:
    """Each ``--allocator NAME`` at the grid's batch sizes, group size (``rollout.n``), band, staleness bound, round
    limit and down-sampling, then the ``--set KEY=VALUE`` overrides."""
    B, G, N = args.train_batch_size, args.gen_batch_size or 3 * args.train_batch_size, args.group_size
    shared = {
        "data.train_batch_size": B,
        "data.gen_batch_size": G,
        "actor_rollout_ref.rollout.n": N,
        "algorithm.diversity_threshold_lower": args.p_lower,
        "algorithm.diversity_threshold_upper": args.p_upper,
        "algorithm.buffer_max_off_steps": args.max_off_steps,
        "algorithm.max_num_gen_batches": args.max_num_gen_batches,
        "algorithm.downsample.n": args.downsample_n,
    }
    shared_text = [f"{key}={'null' if value is None else value}" for key, value in shared.items()]
    configs = []
    for name in args.allocator:
        overrides = (f"algorithm.rollout_allocation={name}", *shared_text, *args.set)
        settings = compose_settings(overrides)  # a bad name or override is named before any dump is read
        label = " ".join([f"{name} n={settings.n_commit} G={settings.gen_batch_size}", *args.set])
        configs.append(Registered(overrides, label))
    return configs


def recommend(predictions: list[Prediction], configs: list | None = None) -> Prediction | None:
    """The fewest generated rollouts per informative group (ties: fewer rounds); with the predictions' ``configs``,
    one a row each, a row of a split measured to need more rollouts than GRPO is passed over (``measured_worse``)."""
    if configs is not None:
        predictions = [p for p, c in zip(predictions, configs, strict=True) if not measured_worse(c)]
    finite = [p for p in predictions if math.isfinite(p.rollouts_per_informative_group)]
    if not finite:
        return None
    return min(finite, key=lambda p: (round(p.rollouts_per_informative_group, 6), p.rounds_per_step))


def recommendation(
    predictions: list[Prediction], configs: list, simulated: list[Prediction], simulated_configs: list
) -> list[str]:
    """The recommendation's lines. With simulated rows (``simulated_configs`` theirs, one a row), the fewest
    generated rollouts per informative group among them if fewer than GRPO's simulated row. Without, no
    recommendation: the analytic model's rows are not measurements, and the regime study measured no split ahead of
    GRPO by a measured margin; the line names the split it measured closest (below GRPO on every mix it ran, on a few
    seeds without an interval). A split measured to need more rollouts than GRPO is passed over, with a line saying
    so."""
    if simulated:
        return _simulated_recommendation(simulated, simulated_configs)
    return _measured_recommendation(predictions, configs)


def _passed_over(rows: list[Prediction], configs: list, source: str) -> list[str]:
    """A line for the fewest per informative group of ``rows`` (by ``source``) if it lost to GRPO when measured."""
    fewest = recommend(rows)
    if fewest is None or fewest is recommend(rows, configs):
        return []
    config = next(c for p, c in zip(rows, configs, strict=True) if p is fewest)
    return [f"not recommended: {fewest.label}, the {source}'s fewest per informative group; {measured_worse(config)}"]


def _simulated_recommendation(rows: list[Prediction], configs: list) -> list[str]:
    lines = _passed_over(rows, configs, "simulator")
    best = recommend(rows, configs)
    grpo = next(p for p, c in zip(rows, configs, strict=True) if isinstance(c, GRPO) and p.label == c.label)
    per_group = grpo.rollouts_per_informative_group
    other = " other" if lines else ""  # the one passed over above may well have been fewer
    if best is None:
        return [
            *lines,
            f"no recommendation: no{other} simulated configuration trains an informative group on these pass rates",
        ]
    if not round(best.rollouts_per_informative_group, 6) < round(per_group, 6):
        return [
            *lines,
            f"no recommendation: no{other} simulated configuration generated fewer rollouts per informative group "
            f"than {grpo.label} ({per_group:.1f}) on this dump",
        ]
    return [
        *lines,
        f"recommended (simulated on this dump): {best.label} ({best.rollouts_per_informative_group:.1f} generated "
        f"rollouts per informative trained group of {best.group_size} against {grpo.label}'s {per_group:.1f}, "
        f"{best.rounds_per_step:.2f} rounds per step)",
        CRITERION_CAVEAT,
    ]


def _measured_recommendation(predictions: list[Prediction], configs: list) -> list[str]:
    if recommend(predictions) is None:
        return ["no configuration ever trains an informative group on these pass rates"]
    lines = _passed_over(predictions, configs, "model")
    # Splits that fill a step on this dump and needed fewer rollouts than GRPO on every mix measured (no interval).
    better = [
        (max(times for _, times in runs), config, runs)
        for pred, config in zip(predictions, configs, strict=True)
        if math.isfinite(pred.rollouts_per_informative_group)
        and (runs := measured_ratios(config))
        and all(times < 1 for _, times in runs)
    ]
    closest = ""
    if better:
        _, config, runs = min(better, key=lambda b: b[0])
        closest = (
            f"; closest: {config.label} needed {_ratios_text(config, runs)}, on two or three seeds without an interval"
        )
    return [
        *lines,
        "no recommendation: no split was measured to reach GRPO's accuracy with fewer rollouts by a measured margin, "
        f"and the model's rows are not measurements{closest} (docs/results/regimes/README.md); --simulate STEPS "
        "ranks the rows on this dump",
    ]


def format_table(predictions: list[Prediction], per_1000: bool = False) -> str:
    """The predictions a row each; ``per_1000``: a last column of informative groups per 1,000 generated rollouts."""
    head = (
        "| configuration | group | rounds/step | pilot rollouts | commit rollouts | rollouts/step | trained groups "
        "| informative groups | filter pass rate | rollouts per informative group |"
    )
    columns = 10
    if per_1000:
        head += " informative groups per 1,000 rollouts |"
        columns += 1
    lines = [head, "|" + "---|" * columns]
    for p in predictions:
        line = (
            f"| {p.label} | {p.group_size} | {p.rounds_per_step:.2f} | {p.pilot_rollouts_per_step:.0f} "
            f"| {p.commit_rollouts_per_step:.0f} | {p.rollouts_per_step:.0f} | {p.trained_groups_per_step:.1f} "
            f"| {p.informative_groups_per_step:.1f} | {p.filter_pass_rate:.3f} "
            f"| {p.rollouts_per_informative_group:.1f} |"
        )
        if per_1000:
            line += f" {p.informative_groups_per_1000_rollouts:.2f} |"
        lines.append(line)
    return "\n".join(lines)


def mean_over_steps(preds: list[Prediction]) -> Prediction:
    """One configuration's predictions for several steps (or one pooled window) as one: the mean of each count a
    step, and the filter pass rate over all their candidates (a step's candidates grow with its rounds)."""
    rounds = np.array([p.rounds_per_step for p in preds])
    passed = np.array([p.filter_pass_rate for p in preds])
    rate = float((passed * rounds).sum() / rounds.sum()) if np.isfinite(rounds).all() else float(passed.mean())
    return Prediction(
        preds[0].label,
        preds[0].group_size,
        float(rounds.mean()),
        float(np.mean([p.pilot_rollouts_per_step for p in preds])),
        float(np.mean([p.commit_rollouts_per_step for p in preds])),
        float(np.mean([p.trained_groups_per_step for p in preds])),
        float(np.mean([p.informative_groups_per_step for p in preds])),
        rate,
    )
