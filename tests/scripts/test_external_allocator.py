"""The documented registration, for real: docs/architecture.md's example allocator, named in VERL_USE_EXTERNAL_MODULES
and nowhere else, is priced by ``plan predict --allocator``, simulated by ``costmodel.simulate`` and accepted, with its
own key, by a ``DRY_RUN=1`` launch. Each runs in a fresh process, where verl imports the module at its own start-up."""

import os
import re
import subprocess
import sys

import yaml
from support import FIXTURES, ROOT, clean_env

from recipe.pc.dry_run import HEADER

EXAMPLE = re.search(
    r"```python\n(.*?)```",
    (text := open(os.path.join(ROOT, "docs", "architecture.md")).read())[text.index("## Writing an allocator") :],
    re.S,
).group(1)

TOOLS = """
import numpy as np
from recipe.pc_tools import plan
from recipe.pc_tools.costmodel import Registered, simulate

overrides = ("algorithm.rollout_allocation=skip_agreed", "algorithm.skip_agreed.patience=2",
             "data.train_batch_size=8", "data.gen_batch_size=16", "actor_rollout_ref.rollout.n=4")
run = simulate(np.r_[np.full(50, 0.5), np.zeros(50)], Registered(overrides, "toy"), steps=10, warmup=5)
print("simulated", run.label, run.group_size, run.trained_groups_per_step)
sizes = ["--train-batch-size", "4", "--gen-batch-size", "8", "--group-size", "4"]
toy = ["--allocator", "skip_agreed", "--set", "algorithm.max_num_gen_batches=20", "--simulate", "3"]
raise SystemExit(plan.main(["predict", sys.argv[1], *sizes, *toy]))
"""


def test_the_documented_allocator_registered_by_environment_works_in_the_tools_and_a_dry_run(tmp_path):
    (tmp_path / "toy_allocator.py").write_text(EXAMPLE)
    env = clean_env(VERL_USE_EXTERNAL_MODULES="toy_allocator", PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}")
    tools = subprocess.run(
        [sys.executable, "-c", "import sys\n" + TOOLS, os.path.join(FIXTURES, "plan")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert tools.returncode == 0, tools.stderr[-3000:]
    assert "simulated toy 4 8" in tools.stdout
    assert "| skip_agreed n=4 G=8 algorithm.max_num_gen_batches=20 | 4 |" in tools.stdout

    script = os.path.join(ROOT, "train_scripts", "smoke_1gpu.sh")
    dry = subprocess.run(
        ["bash", script, "algorithm.rollout_allocation=skip_agreed", "algorithm.skip_agreed.patience=2"],
        capture_output=True,
        text=True,
        env={**env, "DRY_RUN": "1", "SHOW_CONFIG": "1", "OUT_DIR": str(tmp_path / "out")},
        cwd=tmp_path,
        timeout=300,
    )
    assert dry.returncode == 0, dry.stderr[-3000:]
    printed_config, printed_summary = dry.stdout.split(HEADER)
    algorithm = yaml.safe_load(printed_config)["algorithm"]
    assert algorithm["rollout_allocation"] == "skip_agreed" and algorithm["skip_agreed"] == {"patience": 2}
    assert "config checks passed" in dry.stderr
    # The summary knows no rollout counts of an allocator it has not met.
    assert (
        "  allocator   skip_agreed: groups of 4 (an allocator of yours: no rollout counts below)\n" in printed_summary
    )
    assert "  rollouts" not in printed_summary
