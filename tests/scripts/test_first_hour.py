"""The launch scripts as a new user first runs them: every script honours PRESET and tells where its data comes
from, and a paper script's dry run starts with the recipe's own line, shows none of verl's known warnings and names
data/e2e_process_data.sh when the data is missing. Two subprocesses in all."""

import glob
import os
import subprocess

import yaml
from support import ROOT, clean_env

from recipe.pc.dry_run import HEADER

LAUNCHERS = sorted(
    path
    for path in glob.glob(os.path.join(ROOT, "train_scripts", "*.sh"))
    if os.path.basename(path) not in ("common.sh", "common_1gpu.sh", "ray_cluster.sh")
)
ONE_GPU = {os.path.basename(p) for p in LAUNCHERS if p.endswith("_1gpu.sh")}
# What verl printed before the recipe's own lines in a dry run (recipe/pc/known_warnings.py filters them).
VERL_NOISE = (
    "engine is not available",
    "No supported accelerator",
    "is registered but not available",
    "Disabled critic",
)


def test_every_script_passes_preset_through_and_names_its_data_script(tmp_path):
    standin = tmp_path / "trainer"
    standin.write_text("#!/bin/sh\nprintf 'arg: %s\\n' \"$@\"\nprintf 'hint: %s\\n' \"$PC_DATA_HINT\"\n")
    standin.chmod(0o755)
    loop = (
        'for s in "$@"; do echo "=== $(basename "$s")"; PRESET=improved bash "$s" 2>&1; echo "rc=$?"; done; '
        'for s in $BOGUS; do echo "=== bogus $(basename "$s")"; PRESET=bogus bash "$s" 2>&1; echo "rc=$?"; done'
    )
    bogus = " ".join(os.path.join(ROOT, "train_scripts", s) for s in ("grpo_qwen3-4b_n64.sh", "smoke_1gpu.sh"))
    env = clean_env(
        TRAINER_CMD=str(standin), DATA_DIR=str(tmp_path / "data"), OUT_DIR=str(tmp_path / "out"), BOGUS=bogus
    )
    out = subprocess.run(["bash", "-c", loop, "bash", *LAUNCHERS], capture_output=True, text=True, env=env, timeout=120)
    blocks = dict(block.split("\n", 1) for block in out.stdout.split("=== ")[1:])
    assert len(blocks) == len(LAUNCHERS) + 2 and len(LAUNCHERS) >= 16, list(blocks)
    for script in map(os.path.basename, LAUNCHERS):
        lines = blocks[script].splitlines()
        assert lines[-1] == "rc=0", blocks[script]
        assert "arg: preset=improved" in lines, script
        hint = next(line for line in lines if line.startswith("hint: "))
        if script in ONE_GPU:
            assert "data/process_arithmetic.py --out_dir" in hint, script
        else:
            assert "data/e2e_process_data.sh" in hint, script
        # Runs of either preset keep apart: the experiment (and its output folder) is named after it.
        assert any(line.startswith("arg: trainer.experiment_name=") and line.endswith("-improved") for line in lines)
    for name in ("bogus grpo_qwen3-4b_n64.sh", "bogus smoke_1gpu.sh"):
        assert blocks[name].splitlines() == ["PRESET=bogus: choose reference or improved", "rc=2"], blocks[name]


def test_a_paper_dry_run_starts_with_its_own_line_and_names_the_data_script(tmp_path):
    script = os.path.join(ROOT, "train_scripts", "pc_qwen3-4b_p16c48.sh")
    env = clean_env(DRY_RUN="1", SHOW_CONFIG="1", PRESET="improved", DATA_DIR=str(tmp_path))
    out = subprocess.run(["bash", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert out.returncode == 1, out.stderr[-3000:]
    lines = out.stderr.splitlines()
    assert lines[0].startswith("pilot-commit dry run: "), lines[:3]
    assert not [line for line in lines if any(noise in line for noise in VERL_NOISE)]
    errors = [line for line in lines if line.startswith("config error: ")]
    assert len(errors) == 1 and errors[0].startswith("config error: data files not found: "), errors
    assert errors[0].endswith(f"write them with: DATA_DIR={tmp_path} bash {ROOT}/data/e2e_process_data.sh")
    # The config asked for comes before the checks; a refused run gets no summary.
    assert yaml.safe_load(out.stdout)["trainer"]["preset"] == "improved" and HEADER not in out.stdout
