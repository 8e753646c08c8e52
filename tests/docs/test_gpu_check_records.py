"""The committed logs of the GPU checks run on 2026-11-28 pass every reading rule of ``recipe.pc_tools.gpu_check``,
a copy of them that breaks one rule fails it, and docs/gpu-checks/README.md quotes the table the tool prints."""

import json
import os
import shutil

import pytest
from support import ROOT, run_module

from recipe.pc import metric_names as names

RECORDS = os.path.join(ROOT, "docs", "gpu-checks", "2026-11-28")
PAGE = os.path.join(ROOT, "docs", "gpu-checks", "README.md")
TP2 = "tp2 --pair pc {0}/pc_tp1_learn {0}/pc_tp2_learn --pair grpo {0}/grpo_tp1_learn {0}/grpo_tp2_learn"
CHECKS = {"tp2": TP2, "reference": "reference {0}/pc_reference", "resume": "resume {0}/two_nodes"}


def gpu_check(check: str, folder: str, capsys) -> tuple[int, str]:
    """``python -m recipe.pc_tools.gpu_check CHECK`` on the runs under ``folder``: (exit status, stdout)."""
    code = run_module("recipe.pc_tools.gpu_check", *CHECKS[check].format(folder).split())
    return code, capsys.readouterr().out


def test_every_check_on_record_passes_and_the_page_quotes_the_tp2_table(capsys):
    outputs = {}
    for check in CHECKS:
        code, outputs[check] = gpu_check(check, RECORDS, capsys)
        assert code == 0, outputs[check]
    assert outputs["reference"].endswith("pc_reference: 6 steps read, pass\n")
    assert outputs["resume"].endswith("two_nodes: 6 steps read, pass\n")
    rows = [line for line in outputs["tp2"].splitlines() if line.startswith(("| pc |", "| grpo |"))]
    assert len(rows) == 2 and all(row.endswith("| yes |") for row in rows)
    page = open(PAGE, encoding="utf-8").read()
    assert all(row in page for row in rows), rows


def edit_metric(path, step: int, key: str, change) -> None:
    """Rewrite ``key`` at ``step`` of a file-logger metrics file with ``change(old value)``."""
    records = [json.loads(line) for line in open(path)]
    hits = [record for record in records if record["step"] == step and key in record["data"]]
    assert hits, (path, step, key)
    for record in hits:
        record["data"][key] = change(record["data"][key])
    with open(path, "w") as f:
        f.writelines(json.dumps(record) + "\n" for record in records)


# Each edit breaks one rule of one check; the fail line names that rule.
BROKEN = {
    # TP 2's difference doubled on every step: ratio 2.2.
    "tp2_ratio": (
        "tp2",
        [("pc_tp2_learn", step, names.FRESH_PROBS_DIFF, lambda v: 2 * v) for step in range(1, 21)],
        "| pc | 0.0062 | 0.0138 | 2.22 |",
    ),
    # TP 1 learns less (its last five rewards lowered by 0.3, a gain of 0.059), TP 2 unchanged: the gain is required
    # at both sizes.
    "tp1_small_gain": (
        "tp2",
        [("pc_tp1_learn", step, names.PILOT_METRIC_MEAN, lambda v: v - 0.3) for step in range(16, 21)],
        "| +0.059 | +0.364 | no |",
    ),
    "reference_grad_norm": (
        "reference",
        [("pc_reference", 3, "actor/grad_norm", lambda v: None)],
        "fail: actor/grad_norm is not finite at steps [3]",
    ),
    "resume_counter": (
        "resume",
        [("two_nodes", 5, names.CUMULATIVE_SAMPLED, lambda v: v - 512)],
        "fail: generated rollouts did not go on from step 4 (512)",
    ),
}


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_a_copy_that_breaks_one_rule_fails_its_check(tmp_path, capsys, broken):
    check, edits, problem = BROKEN[broken]
    copy = tmp_path / "records"
    shutil.copytree(RECORDS, copy)
    for run, step, key, change in edits:
        files = sorted((copy / run).glob("metrics*.jsonl"))
        path = next(p for p in files if any(json.loads(line)["step"] == step for line in open(p)))
        edit_metric(path, step, key, change)
    code, out = gpu_check(check, str(copy), capsys)
    assert code == 1 and problem in out, out
