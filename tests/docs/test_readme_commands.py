"""The README's commands, as a reader copies them: each one that can run on a CPU machine runs here and succeeds;
the others (installs, GPU launches, hub downloads) are named, so a new command cannot go untried unnoticed.

Commands run in this process where the command allows: dry runs through ``support.dry_run``, ``main_pc --validate``
through the same start-up checks, the tools through ``support.run_module``. Paths under /tmp/ go to the test's own
folder.
"""

import os
import re
import runpy
import shlex
import sys

from support import ROOT, dry_run, run_module, stand_in_data_dir

from recipe.pc.testing import compose_pc_config

README = os.path.join(ROOT, "README.md")

# Commands a CPU test cannot run, each with why; matched on the command's words after its variable assignments
# (with DRY_RUN=1 a launch script is checked, not launched, and runs here).
NOT_RUN = {
    ("python3", "-m", "venv"): "makes a virtual environment",
    ("source", ".venv/bin/activate"): "activates that environment",
    (".venv/bin/python", "-m", "pytest"): "the test suite itself",
    (".venv/bin/pip",): "an install",
    ("pip", "install"): "an install",
    ("bash", "train_scripts/smoke_1gpu.sh"): "a launch on a GPU",
    ("bash", "train_scripts/pc_qwen3-4b_p16c48.sh"): "a launch on GPUs",
    ("bash", "train_scripts/ray_cluster.sh"): "starts Ray on a cluster's nodes",
    ("bash", "data/e2e_process_data.sh"): "downloads the datasets from the hub",
}


def readme_commands() -> list[str]:
    """Every command of the README's bash blocks, continuation lines joined, split at `&&`."""
    with open(README, encoding="utf-8") as f:
        blocks = re.findall(r"^```bash\n(.*?)^```", f.read(), flags=re.M | re.S)
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            commands += [part.strip() for part in line.split("&&") if part.strip()]
    return commands


def parse(command: str) -> tuple[dict, list[str]]:
    """(variable assignments, words) of a command, its comment dropped; a placeholder such as <head ip> is one word."""
    words = shlex.split(re.sub(r"<[^>]*>", "PLACEHOLDER", command), comments=True)
    env = {}
    while words and re.match(r"^[A-Z_]+=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    return env, words


def not_run_reason(words: list[str]) -> str | None:
    return next((why for prefix, why in NOT_RUN.items() if tuple(words[: len(prefix)]) == prefix), None)


def test_every_readme_command_that_runs_on_a_cpu_succeeds(tmp_path, monkeypatch):
    from recipe.pc.startup_checks import preflight

    data_dir = stand_in_data_dir(tmp_path / "data")
    ran = []
    for command in readme_commands():
        env, words = parse(command)
        if env.get("DRY_RUN") != "1" and not_run_reason(words):
            continue
        words = [w.replace("/tmp/", f"{tmp_path}/") for w in words]
        if env.get("DRY_RUN") == "1" and words[0] == "bash" and words[1].startswith("train_scripts/"):
            # Data first, as the README says; the script's own output folder under the test's.
            env = {"DATA_DIR": data_dir, "OUT_DIR": str(tmp_path / "out"), **env}
            env.pop("DRY_RUN")
            run = dry_run(os.path.basename(words[1]), tmp_path, *words[2:], **env)
            assert run.problems == [], f"{command}: {run.problems}"
            ran.append("dry run")
        elif words[:2] == ["python", "-m"] and words[2] == "recipe.pc.main_pc" and words[3] == "--validate":
            problems, _ = preflight(compose_pc_config(words[4:]), fetch_model=False)
            assert problems == [], f"{command}: {problems}"
            ran.append("--validate")
        elif words[:2] == ["python", "-m"]:
            monkeypatch.chdir(ROOT)  # the README's paths are the repository's
            assert run_module(words[2], *words[3:]) == 0, command
            ran.append(words[2])
        elif words[0] == "python" and words[1].endswith(".py"):
            monkeypatch.setattr(sys, "argv", words[1:])
            try:
                runpy.run_path(os.path.join(ROOT, words[1]), run_name="__main__")
            except SystemExit as exit_:  # a script may end with sys.exit(0)
                assert exit_.code in (0, None), f"{command}: exit status {exit_.code}"
            ran.append(words[1])
        else:
            raise AssertionError(f"{command!r}: neither run here nor named in NOT_RUN")
    # The README's examples of each kind were found and run (a parsing slip would skip them silently).
    assert sorted(ran) == [
        "--validate",
        "data/process_arithmetic.py",
        "dry run",
        "dry run",
        "recipe.pc_tools.plan",
        "recipe.pc_tools.report",
    ]
