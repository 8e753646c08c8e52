"""The GPU step benchmark's table: where a run's time goes, and how long a whole line would take.

    python -m recipe.pc_tools.bench RUNS... [--line grpo=36:12 --line pc=42:16] [--assume-startup MIN] [--out TABLE.md]

Each RUNS is a folder holding one folder a run, as ``scripts/gpu/launch.sh bench`` writes them: ``metrics.jsonl``
(verl's file logger) and ``launched_at`` (the Unix time the launcher started it); or ``NAME=FOLDER``, one run's
folder under a bench name (a run launched otherwise). A run is named ``g<K>_<arm>_<fixes>``: K runs shared its GPU,
``arm`` is a key of ``--line``, ``fixes`` names its settings (the bench's: ``on`` or ``off``). A run without a launch
time or a logged wall clock (a log of an earlier release) has no start-up of its own: its projection uses
``--assume-startup``, marked as assumed, or is left out. A run that cannot be read is named under the table; none
readable is an error (exit 2).

Per run, medians over its steps after the first (the first warms up): the step without its validation
(``timing_s/step`` less ``timing_s/testing``), its update, old log-prob and generation, and a validation. Start-up is
the time from the launch to the end of step 1, less one median step and step 1's validation: what a run costs before
its steps run at their pace, the first step's warm-up included. A line of S steps and V validations then takes

    start-up + S x step + V x validation

from its launch to its last validation. The same formula with the run's own steps and validations is printed beside
the run's measured time from launch to its last logged step, so the projection is checked on every row.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recipe.pc import metric_names as m
from recipe.pc_tools.logs import ReportError, load_run

RUN_NAME = re.compile(r"^g(?P<per_gpu>\d+)_(?P<arm>[a-z0-9]+)_(?P<fixes>[a-z]+)$")
# The second pre-registration's lines: steps and validations (every 2,304 rollouts and the last step).
DEFAULT_LINES = {"grpo": (36, 12), "pc": (42, 16)}
TIMING = {
    "update": "timing_s/update_actor",
    "old_log_prob": "timing_s/old_log_prob",
    "generation": "timing_s/gen",
}


@dataclass(frozen=True)
class RunTimes:
    name: str
    per_gpu: int
    arm: str
    fixes: str
    steps: int  # logged steps
    validations: int  # of them, steps that validated
    step: float  # median seconds a step, its validation left out (steps 2+)
    parts: dict  # median seconds of the update, the old log-prob and the generation (steps 2+)
    validation: float  # median seconds a validation (nan without one)
    startup: float  # seconds from the launch to the end of step 1, less one step and step 1's validation (nan: unknown)
    elapsed: float  # seconds from the launch to the end of the last logged step
    probs_diff: float  # median of verl's training/rollout_probs_diff_mean

    def projected(self, steps: int, validations: int) -> float:
        """Seconds from the launch to the last validation of a run of ``steps`` steps and ``validations``
        validations at this run's pace."""
        return line_seconds(self.startup, steps, self.step, validations, self.validation)


def line_seconds(startup: float, steps: int, step: float, validations: int, validation: float) -> float:
    """start-up + steps x step + validations x validation (a line without validations needs no validation time)."""
    return startup + steps * step + (validations * validation if validations else 0.0)


def read_run(folder: Path, name: str | None = None) -> RunTimes:
    name = name or folder.name
    match = RUN_NAME.match(name)
    if not match:
        raise ReportError(f"{name}: a bench run is named g<K>_<arm>_<fixes>, e.g. g2_pc_on")
    metrics = folder / "metrics.jsonl"
    if not metrics.is_file():
        raise ReportError(f"{metrics} is missing: the run logged no step")
    frame = load_run(metrics)
    if m.STEP_TIME not in frame:
        raise ReportError(f"{metrics} has no {m.STEP_TIME}: not a training run's log")
    frame = frame[frame[m.STEP_TIME].notna()].sort_index()
    if len(frame) < 2:
        raise ReportError(f"{folder}: {len(frame)} step logged; the medians need steps after the first")
    testing = frame.get("timing_s/testing", frame[m.STEP_TIME] * np.nan)
    own = frame[m.STEP_TIME] - testing.fillna(0.0)
    later = frame.iloc[1:]
    step = float(own.iloc[1:].median())
    launched = folder / "launched_at"
    startup = elapsed = float("nan")
    if launched.is_file() and m.UNIX_TIME in frame:
        launched_at = float(launched.read_text().strip())
        first_validation = 0.0 if np.isnan(testing.iloc[0]) else float(testing.iloc[0])
        startup = float(frame[m.UNIX_TIME].iloc[0]) - launched_at - step - first_validation
        elapsed = float(frame[m.UNIX_TIME].iloc[-1]) - launched_at
    diff = frame.get("training/rollout_probs_diff_mean")
    return RunTimes(
        name=name,
        per_gpu=int(match["per_gpu"]),
        arm=match["arm"],
        fixes=match["fixes"],
        steps=len(frame),
        validations=int(testing.notna().sum()),
        step=step,
        parts={part: float(later[key].median()) if key in later else float("nan") for part, key in TIMING.items()},
        validation=float(testing.dropna().median()) if testing.notna().any() else float("nan"),
        startup=startup,
        elapsed=elapsed,
        probs_diff=float(diff.median()) if diff is not None else float("nan"),
    )


def _minutes(seconds: float) -> str:
    return "—" if np.isnan(seconds) else f"{seconds / 60:.1f}"


def table(runs: list[RunTimes], lines: dict[str, tuple[int, int]], assume_startup: float | None = None) -> str:
    """The Markdown table; ``assume_startup`` (seconds) stands in for the start-up a run did not record."""
    head = (
        "| run | runs a GPU | fixes | steps (validations) | step w/o validation (s) | update | old log-prob | "
        "generation | validation (s) | start-up (min) | this run: measured / projected (min) | "
        "a line: steps, validations | projected line (min) | probs diff |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for r in sorted(runs, key=lambda r: (r.per_gpu, r.arm, r.fixes, r.name)):
        line_steps, line_vals = lines[r.arm]
        startup = _minutes(r.startup)
        if np.isnan(r.startup) and assume_startup is not None:
            r = dataclasses.replace(r, startup=assume_startup)
            startup = f"{assume_startup / 60:.1f} (assumed)"
        own = r.projected(r.steps, r.validations)
        rows.append(
            f"| {r.name} | {r.per_gpu} | {r.fixes} | {r.steps} ({r.validations}) | {r.step:.1f} | "
            f"{r.parts['update']:.1f} | {r.parts['old_log_prob']:.1f} | {r.parts['generation']:.1f} | "
            f"{r.validation:.1f} | {startup} | {_minutes(r.elapsed)} / {_minutes(own)} | "
            f"{line_steps}, {line_vals} | {_minutes(r.projected(line_steps, line_vals))} | {r.probs_diff:.4f} |"
        )
    return head + "\n".join(rows) + "\n"


def run_folders(args: list[str]) -> list[tuple[str, Path]]:
    """(name, folder) of each run: NAME=FOLDER as given, else every g<K>_<arm>_<fixes> folder in the folder."""
    found = []
    for arg in args:
        name, sep, folder = arg.partition("=")
        if sep:
            found.append((name, Path(folder)))
            continue
        root = Path(arg)
        if not root.is_dir():
            raise ReportError(f"{root} is not a folder")
        found += sorted((p.name, p) for p in root.iterdir() if p.is_dir() and RUN_NAME.match(p.name))
    return found


def parse_lines(values: list[str]) -> dict[str, tuple[int, int]]:
    lines = dict(DEFAULT_LINES)
    for value in values:
        arm, _, spec = value.partition("=")
        steps, _, validations = spec.partition(":")
        if not (arm and steps.isdigit() and validations.isdigit()):
            raise ReportError(f"--line {value!r}: write ARM=STEPS:VALIDATIONS, e.g. pc=42:16")
        lines[arm] = (int(steps), int(validations))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recipe.pc_tools.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "runs", nargs="+", help="a folder holding one folder a bench run, or NAME=FOLDER for one run's folder"
    )
    parser.add_argument(
        "--line",
        action="append",
        default=[],
        metavar="ARM=STEPS:VALIDATIONS",
        help="the line a run of ARM projects to (default: grpo=36:12, pc=42:16)",
    )
    parser.add_argument(
        "--assume-startup",
        type=float,
        metavar="MIN",
        help="minutes of start-up for runs that recorded none (an earlier release's logs); default: no projection",
    )
    parser.add_argument("--out", type=Path, help="also write the table to this Markdown file")
    args = parser.parse_args(argv)
    runs, unread = [], []
    try:
        lines = parse_lines(args.line)
        for name, folder in run_folders(args.runs):
            try:
                runs.append(read_run(folder, name))
            except ReportError as err:
                unread.append(f"not read: {name}: {err}")
        if not runs:
            raise ReportError("; ".join(unread) or f"{' '.join(args.runs)}: no bench run (g<K>_<arm>_<fixes>)")
        unknown = sorted({r.arm for r in runs} - lines.keys())
        if unknown:
            raise ReportError(f"no --line for arm {', '.join(unknown)}: add --line ARM=STEPS:VALIDATIONS")
    except ReportError as err:
        print(f"recipe.pc_tools.bench: {err}", file=sys.stderr)
        return 2
    assume = None if args.assume_startup is None else args.assume_startup * 60
    text = table(runs, lines, assume) + "".join(f"\n{line}\n" for line in unread)
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
