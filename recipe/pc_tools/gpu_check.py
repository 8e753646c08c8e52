"""Pass or fail of the GPU checks, read from their logs by rules fixed before the runs.

    python -m recipe.pc_tools.gpu_check tp2 --pair pc RUNS/pc_tp1 RUNS/pc_tp2 --pair grpo RUNS/grpo_tp1 RUNS/grpo_tp2
    python -m recipe.pc_tools.gpu_check reference RUNS/pc_reference
    python -m recipe.pc_tools.gpu_check resume RUNS/two_nodes

A run is a folder with verl's file-logger ``metrics.jsonl`` (or one file a phase, ``metrics_first.jsonl`` and
``metrics_resumed.jsonl``) and the console's ``log.txt``. Exit status 0: every rule holds; 1: a rule fails (a phase's
metrics file missing is a failure of ``resume``, which checks where they went); 2: a log is missing or lacks a metric
the rule needs.

``tp2``: trained weights reach rollout tensor-parallel-2 replicas intact. For each pair of runs that differ only in
the rollout's tensor-parallel size, both ran all ``--steps`` steps; the mean over steps of
``training/fresh_rollout_probs_diff_mean`` (verl's rollout-against-actor probability difference over the rows
generated that step; verl's own ``training/rollout_probs_diff_mean`` also counts the age of PC's reused pilots) at
TP 2 is at most ``MAX_DIFF_RATIO`` times TP 1's, with a value on every step; and the mean reward of the step's
first-round rollouts (``pilot_stats/metric_mean``: the pilots for PC, every rollout for GRPO) over the last
``WINDOW`` steps exceeds the first ``WINDOW`` steps' by at least ``MIN_REWARD_GAIN`` at both sizes.

``reference``: the reference preset's update ran as the authors' did, for all ``--steps`` steps: the trainer's
``update:`` line names the ``pc_reference`` loss, reference row order and a partial last mini-batch; every step's
gradient norm is finite; every step ran as many optimizer steps as PPO mini-batches, with the partial one weighted
below 1.

``resume``: a run saves and resumes its whole state (across two Ray nodes, or at data-parallel 8). The first phase
logged steps 1-4 to ``metrics_first.jsonl`` and the resumed phase steps 5-6 to ``metrics_resumed.jsonl`` (the paths
they configured); the resumed count of generated rollouts goes on from step 4's; the console shows the PC state saved
at steps 2 and 4 and, at the resume, the same state as saved at step 4; both phases exited 0.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from recipe.pc import metric_names as m
from recipe.pc_tools.logs import ReportError, load_run, merge_steps

MAX_DIFF_RATIO = 1.5
MIN_REWARD_GAIN = 0.1
WINDOW = 5
PROBS_DIFF = m.FRESH_PROBS_DIFF
GRAD_NORM = "actor/grad_norm"
UPDATE_LINE = re.compile(r"recipe\.pc\.pc_ray_trainer: update: (?P<text>.*)$", re.M)
# What the trainer's start-up "update:" line says under the reference preset (RayPCTrainer._update_summary).
REFERENCE_UPDATE = ("policy loss pc_reference", "reference row order", "a partial last mini-batch")


def metrics(run: Path, *needed: str) -> pd.DataFrame:
    """The run's metrics: ``metrics.jsonl``, or its phases' files (``metrics_first.jsonl``, ...) one after another."""
    files = sorted(run.glob("metrics*.jsonl"))
    if not files:
        raise ReportError(f"{run}: no metrics*.jsonl")
    frame = merge_steps(pd.concat([load_run(path) for path in files]))
    missing = [name for name in needed if name not in frame.columns]
    if missing:
        hint = " (log it with actor_rollout_ref.rollout.calculate_log_probs=true)" if PROBS_DIFF in missing else ""
        raise ReportError(f"{files[0]}: no {', '.join(missing)}{hint}")
    return frame


@dataclass(frozen=True)
class TP2Pair:
    label: str
    diff_tp1: float
    diff_tp2: float
    gain_tp1: float
    gain_tp2: float
    problems: tuple[str, ...] = ()  # a run that stopped early, or a step without the difference

    @property
    def ratio(self) -> float:
        return self.diff_tp2 / self.diff_tp1 if self.diff_tp1 > 0 else math.inf

    @property
    def passed(self) -> bool:
        gains_ok = min(self.gain_tp1, self.gain_tp2) >= MIN_REWARD_GAIN
        return not self.problems and self.ratio <= MAX_DIFF_RATIO and gains_ok


def reward_gain(frame: pd.DataFrame, where: Path) -> float:
    reward = frame[m.PILOT_METRIC_MEAN].dropna()
    if len(reward) < 2 * WINDOW:
        raise ReportError(f"{where}: {len(reward)} steps with a reward, fewer than the {2 * WINDOW} the rule reads")
    return float(reward.iloc[-WINDOW:].mean() - reward.iloc[:WINDOW].mean())


def tp2_run(run: Path, steps: int) -> tuple[float, float, list[str]]:
    """(mean probability difference, reward gain, problems) of one run that should have trained ``steps`` steps."""
    frame = metrics(run, PROBS_DIFF, m.PILOT_METRIC_MEAN)
    trained = frame[frame[m.PILOT_METRIC_MEAN].notna()]  # a validation-only step 0 has no reward
    problems = []
    if len(trained) != steps:
        problems.append(f"{run}: {len(trained)} steps trained, not {steps}")
    # A NaN difference is written as null and reads as missing.
    missing = trained.index[trained[PROBS_DIFF].isna()].tolist()
    if missing:
        problems.append(f"{run}: no {PROBS_DIFF} at steps {missing}")
    return float(trained[PROBS_DIFF].mean()), reward_gain(trained, run), problems


def tp2_pair(label: str, tp1: Path, tp2: Path, steps: int) -> TP2Pair:
    (diff1, gain1, problems1), (diff2, gain2, problems2) = tp2_run(tp1, steps), tp2_run(tp2, steps)
    return TP2Pair(label, diff1, diff2, gain1, gain2, tuple(problems1 + problems2))


def tp2_table(pairs: list[TP2Pair]) -> str:
    lines = [
        "| runs | probs diff TP 1 | probs diff TP 2 | ratio | reward gain TP 1 | reward gain TP 2 | pass |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in pairs:
        lines.append(
            f"| {p.label} | {p.diff_tp1:.4f} | {p.diff_tp2:.4f} | {p.ratio:.2f} | {p.gain_tp1:+.3f} | "
            f"{p.gain_tp2:+.3f} | {'yes' if p.passed else 'no'} |"
        )
    lines.append(
        f"\nrule: every step run and its difference logged; ratio <= {MAX_DIFF_RATIO}; mean reward of the last "
        f"{WINDOW} steps minus the first {WINDOW} >= {MIN_REWARD_GAIN} at both sizes"
    )
    lines += [f"fail: {problem}" for p in pairs for problem in p.problems]
    return "\n".join(lines)


def reference_problems(run: Path, steps: int) -> tuple[list[str], int]:
    """(what breaks the reference rule in ``run``, which should have trained ``steps`` steps; steps read)."""
    log = run / "log.txt"
    if not log.is_file():
        raise ReportError(f"{log}: no such file")
    frame = metrics(run, GRAD_NORM, m.PPO_MINI_BATCHES, m.OPTIMIZER_STEPS, m.PARTIAL_MINI_BATCH_WEIGHT)
    # Training steps only: a validation before training logs a step 0 without an update. A NaN grad norm may be
    # written as null, which reads as missing: both count as not finite.
    frame = frame[frame[m.PPO_MINI_BATCHES].notna()]
    problems = [] if len(frame) == steps else [f"{run}: {len(frame)} steps trained, not {steps}"]
    lines = [match.group("text") for match in UPDATE_LINE.finditer(log.read_text(errors="replace"))]
    if not lines:
        problems.append(f"{log}: no 'update:' line (the trainer logs it at start-up)")
    for text in lines[:1]:
        for want in REFERENCE_UPDATE:
            if want not in text:
                problems.append(f"{log}: the update line lacks '{want}': {text}")
    infinite = frame.index[~frame[GRAD_NORM].map(math.isfinite)].tolist()
    if infinite:
        problems.append(f"{GRAD_NORM} is not finite at steps {infinite}")
    unequal = frame.index[frame[m.PPO_MINI_BATCHES] != frame[m.OPTIMIZER_STEPS]].tolist()
    if unequal:
        problems.append(f"optimizer steps differ from PPO mini-batches at steps {unequal}")
    whole = frame.index[frame[m.PARTIAL_MINI_BATCH_WEIGHT] >= 1].tolist()
    if whole:
        problems.append(f"no partial mini-batch weighted below 1 at steps {whole}")
    return problems, len(frame)


SAVED_AT = re.compile(r"saved PC state at step (\d+): (.*)$", re.M)
RESUMED_AT = re.compile(r"resumed PC state at step (\d+): (.*)$", re.M)
PHASES = {"first": [1, 2, 3, 4], "resumed": [5, 6]}


def resume_problems(run: Path) -> tuple[list[str], int]:
    """(what breaks the resume rule in ``run``, steps read)."""
    log = run / "log.txt"
    if not log.is_file():
        raise ReportError(f"{log}: no such file")
    text = log.read_text(errors="replace")
    problems, frames = [], {}
    for phase, want in PHASES.items():
        path = run / f"metrics_{phase}.jsonl"
        if not path.is_file():
            problems.append(f"{path}: no such file (the metrics did not reach the configured path)")
            continue
        frame = load_run(path)
        absent = [name for name in (m.ROLLOUTS_SAMPLED, m.CUMULATIVE_SAMPLED) if name not in frame.columns]
        if absent:
            raise ReportError(f"{path}: no {', '.join(absent)}")
        frames[phase] = frame = frame[frame[m.ROLLOUTS_SAMPLED].notna()]
        if frame.index.tolist() != want:
            problems.append(f"{path}: training steps {frame.index.tolist()}, not {want}")
        if f"{phase}: exit code 0" not in text:
            problems.append(f"{log}: no '{phase}: exit code 0'")
    if len(frames) == 2 and 4 in frames["first"].index and 5 in frames["resumed"].index:
        before, after = frames["first"].loc[4], frames["resumed"].loc[5]
        if after[m.CUMULATIVE_SAMPLED] != before[m.CUMULATIVE_SAMPLED] + after[m.ROLLOUTS_SAMPLED]:
            problems.append(
                f"generated rollouts did not go on from step 4 ({before[m.CUMULATIVE_SAMPLED]:.0f}): step 5 logged "
                f"{after[m.CUMULATIVE_SAMPLED]:.0f} in all, {after[m.ROLLOUTS_SAMPLED]:.0f} of them its own"
            )
    saved, resumed = dict(SAVED_AT.findall(text)), RESUMED_AT.findall(text)
    missing = [step for step in ("2", "4") if step not in saved]
    if missing:
        problems.append(f"{log}: no 'saved PC state' line at step(s) {', '.join(missing)}")
    if [step for step, _ in resumed] != ["4"]:
        problems.append(f"{log}: 'resumed PC state' at steps {[step for step, _ in resumed]}, not once at 4")
    elif "4" in saved and resumed[0][1] != saved["4"]:
        problems.append(f"the state resumed at step 4 ({resumed[0][1]}) is not the one saved ({saved['4']})")
    return problems, sum(len(f) for f in frames.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recipe.pc_tools.gpu_check", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="check", required=True)
    tp2 = sub.add_parser("tp2", help="trained weights reach rollout TP-2 replicas intact")
    tp2.add_argument("--pair", nargs=3, action="append", required=True, metavar=("LABEL", "TP1_RUN", "TP2_RUN"))
    tp2.add_argument("--steps", type=int, default=20, help="steps each run trains (launch.sh tp2-learn: 20)")
    reference = sub.add_parser("reference", help="the reference preset's update ran as the authors' did")
    reference.add_argument("run", type=Path)
    reference.add_argument("--steps", type=int, default=6, help="steps the run trains (launch.sh reference, dp8: 6)")
    resume = sub.add_parser("resume", help="a run in two phases saved and resumed its whole state")
    resume.add_argument("run", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.check == "tp2":
            pairs = [tp2_pair(label, Path(tp1), Path(tp2), args.steps) for label, tp1, tp2 in args.pair]
            print(tp2_table(pairs))
            return 0 if all(p.passed for p in pairs) else 1
        if args.check == "reference":
            problems, steps = reference_problems(args.run, args.steps)
        else:
            problems, steps = resume_problems(args.run)
    except ReportError as err:
        print(f"gpu_check: {err}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"fail: {problem}")
    print(f"{args.run}: {steps} steps read, {'fail' if problems else 'pass'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
