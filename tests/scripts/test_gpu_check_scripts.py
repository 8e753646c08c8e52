"""scripts/gpu/retry_start.sh restarts a run only for vLLM's start-up memory race, before any step; launch.sh's
stop mode ends one run and its Ray processes and no other."""

import os
import shlex
import subprocess
import sys

import pytest
from support import ROOT, wait_until

SCRIPT = os.path.join(ROOT, "scripts", "gpu", "retry_start.sh")
STEP = '{"step": 1, "data": {"training/global_step": 1}}'
RACE = "AssertionError: Error in memory profiling. Initial free memory 66.4 GiB, current free memory 72.06 GiB."


def run_with_retry(tmp_path, body: str, tries: int = 3) -> tuple[int, int, str]:
    """Run a fake training command under retry_start.sh; (exit code, times it ran, stderr)."""
    counter = tmp_path / "count"
    command = f"n=$(($(cat {counter} 2>/dev/null || echo 0) + 1)); echo $n > {counter}; {body}"
    env = {**os.environ, "OUT_DIR": str(tmp_path), "START_TRIES": str(tries), "RETRY_SLEEP_S": "0"}
    env.pop("RAY_TMP", None)
    env.pop("VERL_FILE_LOGGER_PATH", None)
    result = subprocess.run(["bash", SCRIPT, "bash", "-c", command], env=env, capture_output=True, text=True)
    return result.returncode, int(counter.read_text()), result.stderr


# A side-by-side run whose own Ray head did not come up (train_scripts/ray_cluster.sh's wait_for) is retried too.
HEAD_DOWN = "the Ray head stopped; see /tmp/ray_x/ray_cluster_head.log"


@pytest.mark.parametrize("failure", [RACE, HEAD_DOWN])
def test_a_failed_start_is_retried_until_a_start_succeeds(tmp_path, failure):
    rc, runs, _ = run_with_retry(tmp_path, f'[ $n -lt 3 ] && {{ echo "{failure}"; exit 1; }}; exit 0')
    assert (rc, runs) == (0, 3)
    assert (tmp_path / "attempt_1.log").read_text().strip() == failure


def test_kill_ray_tmp_ends_a_heads_whole_session(tmp_path):
    """Ray renames its agents (ray::DashboardAgent ...): their command lines do not name the temp dir, and they held
    the head's ports after the raylet was killed. The head's session (its pid file) ends them."""
    ray_tmp = tmp_path / "ray_x"
    ray_tmp.mkdir()
    sleep = "import time; time.sleep(120)"
    code = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {sleep!r}]); {sleep}"
    head = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        (ray_tmp / "ray_cluster_head.pid").write_text(str(head.pid))

        def members():
            return subprocess.run(["pgrep", "-s", str(head.pid)], capture_output=True, text=True).stdout.split()

        for _ in range(50):
            if len(members()) == 2:
                break
            subprocess.run(["sleep", "0.1"])
        assert len(members()) == 2  # the head and its "agent", neither naming the temp dir
        source = os.path.join(ROOT, "scripts", "gpu", "ray_tmp.sh")
        subprocess.run(["bash", "-c", f'set -euo pipefail; source {source}; kill_ray_tmp "{ray_tmp}"'], check=True)
        head.wait(timeout=10)
        for _ in range(50):
            if not members():
                break
            subprocess.run(["sleep", "0.1"])
        assert members() == []
    finally:
        head.kill()
        head.wait()


def test_it_gives_up_after_start_tries(tmp_path):
    rc, runs, err = run_with_retry(tmp_path, f'echo "{RACE}"; exit 7', tries=2)
    assert (rc, runs) == (7, 2)
    assert "giving up after 2" in err
    assert err.count("retrying") == 1  # no retry message (nor wait) after the last attempt


@pytest.mark.parametrize(
    "body",
    [
        "echo 'RuntimeError: CUDA out of memory'; exit 3",  # another failure: returned as it is
        # the race message, but a training step was already logged: a restart would start the run over
        f"echo '{STEP}' > $OUT_DIR/metrics.jsonl; echo \"{RACE}\"; exit 3",
    ],
)
def test_other_failures_and_started_runs_are_not_retried(tmp_path, body):
    rc, runs, _ = run_with_retry(tmp_path, body)
    assert (rc, runs) == (3, 1)


def test_a_retry_kills_this_runs_ray_processes_and_no_others(tmp_path):
    name = f"retrytest{os.getpid()}"
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    own = subprocess.Popen([*sleeper, f"--temp-dir=/tmp/ray_{name}/session_1"])
    other = subprocess.Popen([*sleeper, f"--temp-dir=/tmp/ray_{name}0/session_1"])
    try:
        counter = tmp_path / "count"
        count = f"n=$(($(cat {counter} 2>/dev/null || echo 0) + 1)); echo $n > {counter}"
        command = f'{count}; [ $n -lt 2 ] && {{ echo "{RACE}"; exit 1; }}; exit 0'
        env = {**os.environ, "OUT_DIR": str(tmp_path), "RETRY_SLEEP_S": "0", "RAY_TMP": f"/tmp/ray_{name}"}
        env.pop("VERL_FILE_LOGGER_PATH", None)
        result = subprocess.run(["bash", SCRIPT, "bash", "-c", command], env=env, capture_output=True, text=True)
        assert result.returncode == 0 and counter.read_text().strip() == "2"
        assert own.wait(timeout=10) is not None  # the failed attempt's Ray processes are gone
        assert other.poll() is None  # another run's (a name that extends this one) are not
    finally:
        for process in (own, other):
            process.kill()
            process.wait()


@pytest.mark.parametrize("tries", ["0", "two"])
def test_a_bad_start_tries_is_refused_before_running(tmp_path, tries):
    env = {**os.environ, "OUT_DIR": str(tmp_path), "START_TRIES": tries}
    result = subprocess.run(
        ["bash", SCRIPT, "bash", "-c", 'touch "$OUT_DIR/ran"'], env=env, capture_output=True, text=True
    )
    assert result.returncode == 2 and f"START_TRIES={tries}" in result.stderr
    assert not (tmp_path / "ran").exists()


LAUNCH = os.path.join(ROOT, "scripts", "gpu", "launch.sh")


def test_stop_ends_a_run_and_its_ray_processes_but_not_a_run_whose_name_extends_it(tmp_path):
    name = f"stoptest{os.getpid()}"
    runs = tmp_path / "runs"
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    # run() writes the pid of a session leader (setsid); Ray's processes carry the run's temp dir in their arguments.
    launcher = subprocess.Popen(sleeper, start_new_session=True)
    ray_worker = subprocess.Popen([*sleeper, f"--temp-dir=/tmp/ray_{name}/session_1"])
    sibling = subprocess.Popen([*sleeper, f"--temp-dir=/tmp/ray_{name}0/session_1"])
    try:
        for run, pid in ((name, launcher.pid), (f"{name}0", sibling.pid)):
            (runs / run).mkdir(parents=True)
            (runs / run / "pid").write_text(f"{pid}\n")
        env = {**os.environ, "RUNS": str(runs)}
        result = subprocess.run(
            ["bash", LAUNCH, "stop", "load shedding", name], env=env, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        assert launcher.wait(timeout=10) is not None and ray_worker.wait(timeout=10) is not None
        assert sibling.poll() is None  # pc_s1 must not stop pc_s10
        assert f"stopped {name}: load shedding" in (runs / "launch.log").read_text()
        missing = subprocess.run(["bash", LAUNCH, "stop", "why", "nosuchrun"], env=env, capture_output=True, text=True)
        assert missing.returncode == 2 and "no run nosuchrun" in missing.stderr
    finally:
        for process in (launcher, ray_worker, sibling):
            process.kill()
            process.wait()


def launch(*args: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", LAUNCH, *args], env={**os.environ, **env}, capture_output=True, text=True)


BATCH = (
    "# NAME MIX SCRIPT OVERRIDES...\na_s1 mix s.sh x=1\n\na_s10 mix s.sh x=10\nb_s1 other t.sh\nc_s1 mix s.sh y=2 z=3\n"
)


def test_batch_plan_spreads_runs_over_the_hosts_gpus_and_picks_named_lines(tmp_path):
    batch = tmp_path / "batch.txt"
    batch.write_text(BATCH)
    plan = launch("batch-plan", str(batch), NGPUS="2")
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.splitlines() == [
        "a_s1 0 mix s.sh x=1",
        "a_s10 1 mix s.sh x=10",
        "b_s1 0 other t.sh",
        "c_s1 1 mix s.sh y=2 z=3",
    ]
    # Named lines only, numbered among themselves: a 2-GPU lease runs part of a batch written for 4.
    picked = launch("batch-plan", str(batch), "c_s1", "a_s1", NGPUS="4")
    assert picked.stdout.splitlines() == ["a_s1 0 mix s.sh x=1", "c_s1 1 mix s.sh y=2 z=3"]
    # A name picks its own line only, not a run whose name it extends or that extends it.
    assert launch("batch-plan", str(batch), "a_s10", NGPUS="4").stdout.splitlines() == ["a_s10 0 mix s.sh x=10"]
    # A name is a string, not a pattern; an unknown one stops everything.
    for bad in ("a_s", "a.s1", ".*", "#"):
        missing = launch("batch-plan", str(batch), "a_s1", bad, NGPUS="2")
        assert missing.returncode == 2 and f"no run {bad} in" in missing.stderr and missing.stdout == ""
    comments = tmp_path / "comments.txt"
    comments.write_text("# nothing to run\n\n")
    empty = launch("batch-plan", str(comments), NGPUS="2")
    assert empty.returncode == 2 and "no run in" in empty.stderr


def test_batch_plan_cycles_over_the_gpus_named_in_GPUS_and_refuses_others(tmp_path):
    batch = tmp_path / "batch.txt"
    batch.write_text(BATCH)
    # Groups-of-16 runs packed on GPU 3 while the groups-of-64 runs of the same lease have GPUs 0-2 to themselves.
    plan = launch("batch-plan", str(batch), "b_s1", "c_s1", "a_s10", NGPUS="4", GPUS="3")
    assert [line.split()[:2] for line in plan.stdout.splitlines()] == [["a_s10", "3"], ["b_s1", "3"], ["c_s1", "3"]]
    plan = launch("batch-plan", str(batch), NGPUS="4", GPUS="2 0")
    assert [line.split()[1] for line in plan.stdout.splitlines()] == ["2", "0", "2", "0"]
    for bad, why in (
        ("4", "no GPU 4 on this host (0 to 3)"),
        ("1 x", "no GPU x"),
        ("-1", "no GPU -1"),
        (" ", "GPUS is empty"),
    ):
        refused = launch("batch-plan", str(batch), NGPUS="4", GPUS=bad)
        assert refused.returncode == 2 and why in refused.stderr and refused.stdout == "", (bad, refused.stderr)


def test_batch_plan_keeps_every_named_line_however_long_the_names_after_it(tmp_path):
    # batch-plan once piped the names into `grep -q` under pipefail: grep exiting at a match killed printf with
    # SIGPIPE if names were still unwritten, and the line was skipped (on a busy machine, now and then). Names
    # past a pipe's 64 KiB buffer made that certain; read from a here-string they cannot.
    long_names = [f"{k}{'x' * 100_000}" for k in "ab"]  # each under the kernel's 128 KiB limit on one argument
    batch = tmp_path / "batch.txt"
    batch.write_text(BATCH + "".join(f"{name} mix s.sh\n" for name in long_names))
    plan = launch("batch-plan", str(batch), "b_s1", "c_s1", "a_s10", *long_names, NGPUS="4", GPUS="3 1")
    assert plan.returncode == 0, plan.stderr[-500:]
    picked = [line.split()[:2] for line in plan.stdout.splitlines()]
    assert picked == [[n, g] for n, g in zip(["a_s10", "b_s1", "c_s1", *long_names], "31313", strict=True)]


def test_batch_waits_before_a_second_run_on_a_gpu_and_not_between_gpus(tmp_path):
    batch = tmp_path / "batch.txt"
    batch.write_text(BATCH)
    env = {**os.environ, "NGPUS": "4", "DRY_RUN": "1", "RUNS": str(tmp_path / "runs"), "WAVE_GAP": "7"}

    def steps(**extra) -> list[str]:
        done = subprocess.run(
            ["bash", LAUNCH, "batch", str(batch)], env={**env, **extra}, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return [line.split(":")[0] for line in done.stdout.splitlines()]

    # One wave over GPUs 0-3: no wait. All on one GPU: a wait before every run after the first (vLLM's start-up
    # memory check races with another engine starting on the same GPU).
    assert steps() == [f"start {n} on GPUs {g}" for n, g in (("a_s1", 0), ("a_s10", 1), ("b_s1", 2), ("c_s1", 3))]
    assert steps(GPUS="3") == [
        "start a_s1 on GPUs 3",
        "wait 7 s",
        "start a_s10 on GPUs 3",
        "wait 7 s",
        "start b_s1 on GPUs 3",
        "wait 7 s",
        "start c_s1 on GPUs 3",
    ]
    # Two waves over two GPUs: one wait, between them.
    assert steps(GPUS="0 1") == [
        "start a_s1 on GPUs 0",
        "start a_s10 on GPUs 1",
        "wait 7 s",
        "start b_s1 on GPUs 0",
        "start c_s1 on GPUs 1",
    ]
    assert steps(GPUS="0 1 0") == [
        "start a_s1 on GPUs 0",
        "start a_s10 on GPUs 1",
        "wait 7 s",
        "start b_s1 on GPUs 0",
        "wait 7 s",
        "start c_s1 on GPUs 0",
    ]


def test_batch_plan_counts_the_gpus_nvidia_smi_lists(tmp_path):
    batch = tmp_path / "batch.txt"
    batch.write_text(BATCH)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    path = f"{bin_dir}:{os.environ['PATH']}"
    smi.write_text("#!/bin/sh\nprintf 'GPU 0: H100 (UUID: a)\\nGPU 1: H100 (UUID: b)\\nGPU 2: H100 (UUID: c)\\n'\n")
    smi.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "NGPUS"}
    plan = subprocess.run(
        ["bash", LAUNCH, "batch-plan", str(batch)], env={**env, "PATH": path}, capture_output=True, text=True
    )
    assert [line.split()[1] for line in plan.stdout.splitlines()] == ["0", "1", "2", "0"]
    smi.write_text("#!/bin/sh\nexit 9\n")  # no GPU (or no driver)
    none = subprocess.run(
        ["bash", LAUNCH, "batch-plan", str(batch)], env={**env, "PATH": path}, capture_output=True, text=True
    )
    assert none.returncode == 2 and "no GPUs (set NGPUS)" in none.stderr


def test_batch_starts_each_planned_run_on_its_gpu_from_any_folder(tmp_path):
    batch = tmp_path / "batch.txt"
    batch.write_text(BATCH)
    runs = tmp_path / "runs"
    # Started by a relative path from its own folder: the script cds to the repo root before it plans.
    env = {**os.environ, "NGPUS": "2", "DRY_RUN": "1", "RUNS": str(runs)}
    started = subprocess.run(
        ["bash", "launch.sh", "batch", str(batch), "c_s1", "b_s1"],
        env=env,
        capture_output=True,
        text=True,
        cwd=os.path.dirname(LAUNCH),
    )
    assert started.returncode == 0, started.stderr
    lines = started.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["start b_s1 on GPUs 0", "start c_s1 on GPUs 1"]
    assert "DATA_DIR=/tmp/data/other STEPS=30 bash train_scripts/t.sh trainer.rollout_data_dir=" in lines[0]
    assert lines[1].endswith(f"bash train_scripts/s.sh y=2 z=3 trainer.rollout_data_dir={runs}/c_s1/dump")
    refused = launch("batch", str(batch), "zz", NGPUS="2", DRY_RUN="1", RUNS=str(runs))
    assert refused.returncode == 2 and refused.stdout == "" and "no run zz" in refused.stderr
    # A real start needs the commit being run, which every run's log then names; nothing starts without it.
    unnamed = launch("batch", str(batch), NGPUS="2", RUNS=str(runs), PC_COMMIT="")
    assert unnamed.returncode == 2 and "set PC_COMMIT" in unnamed.stderr and not (runs / "launch.log").exists()


def launch_lines(mode: str) -> list[tuple[str, dict, str, list[str]]]:
    """(run name, environment, train script, overrides) of each run ``launch.sh MODE`` would start (DRY_RUN=1)."""
    out = subprocess.run(["bash", LAUNCH, mode], env={**os.environ, "DRY_RUN": "1"}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    runs = []
    for line in out.stdout.splitlines():
        head, _, command = line.partition(": ")
        words = command.split()
        at = words.index("bash")
        env = dict(w.split("=", 1) for w in words[:at])
        runs.append((head.split()[1], env, os.path.basename(words[at + 1]), words[at + 2 :]))
    return runs


def test_tp2_learn_pairs_differ_only_in_the_rollouts_tensor_parallel_size(tmp_path):
    from support import dry_run, stand_in_data_dir, stand_in_model

    data, model = stand_in_data_dir(tmp_path / "data"), stand_in_model(tmp_path / "model")
    configs = {}
    for name, env, script, overrides in launch_lines("tp2-learn"):
        assert env["MODEL_PATH"] == "/tmp/models/smollm2_even"  # the padded model: 12 and 4 heads split over 2
        env.update(MODEL_PATH=model, DATA_DIR=data)
        (tmp_path / name).mkdir()
        run = dry_run(script, tmp_path / name, *overrides, **env)
        assert run.problems == [], (name, run.problems)
        configs[name] = run.resolved()
    assert sorted(configs) == ["grpo_tp1_learn", "grpo_tp2_learn", "pc_tp1_learn", "pc_tp2_learn"]
    for method in ("pc", "grpo"):
        tp1, tp2 = configs[f"{method}_tp1_learn"], configs[f"{method}_tp2_learn"]
        assert (
            tp1.actor_rollout_ref.rollout.tensor_model_parallel_size,
            tp2.actor_rollout_ref.rollout.tensor_model_parallel_size,
        ) == (1, 2)
        assert tp2.actor_rollout_ref.rollout.calculate_log_probs and tp2.trainer.n_gpus_per_node == 2
        tp2.actor_rollout_ref.rollout.tensor_model_parallel_size = 1
        for section in ("trainer",):  # output folders and names differ by run; the rest must not
            for k in ("default_local_dir", "experiment_name", "rollout_data_dir"):
                tp1[section][k] = tp2[section][k] = None
        assert tp1 == tp2, method


def test_tp2_learn_runs_one_pair_alone_on_gpus_0_and_1_of_a_two_gpu_host():
    both = launch("tp2-learn", DRY_RUN="1")
    assert both.returncode == 0, both.stderr
    # "start NAME on GPUs G: COMMAND" -> (NAME, G, COMMAND)
    started = [
        tuple(line.removeprefix("start ").replace(" on GPUs ", ": ", 1).split(": ", 2))
        for line in both.stdout.splitlines()
    ]
    assert [(name, gpus) for name, gpus, _ in started] == [
        ("pc_tp2_learn", "0,1"),
        ("grpo_tp2_learn", "2,3"),
        ("pc_tp1_learn", "0,1"),
        ("grpo_tp1_learn", "2,3"),
    ]
    for pair in ("pc", "grpo"):
        alone = launch("tp2-learn", pair, DRY_RUN="1")
        assert alone.returncode == 0, alone.stderr
        # The same two runs, TP 2 first, each with the command it has beside the other pair, on GPUs 0,1.
        want = [f"start {name} on GPUs 0,1: {command}" for name, _, command in started if name.startswith(f"{pair}_")]
        assert alone.stdout.splitlines() == want
    refused = launch("tp2-learn", "dapo", DRY_RUN="1")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip() == "tp2-learn: no pair 'dapo' (pc, grpo, or none for both)"


def test_reference_check_runs_the_reference_update_with_a_partial_mini_batch_on_two_ranks(tmp_path):
    from support import dry_run, stand_in_data_dir, stand_in_model

    from recipe.pc.minibatch import mini_batch_plan
    from recipe.pc.settings import PCSettings

    [(name, env, script, overrides)] = launch_lines("reference")
    env.update(MODEL_PATH=stand_in_model(tmp_path / "model"), DATA_DIR=stand_in_data_dir(tmp_path / "data"))
    run = dry_run(script, tmp_path, *overrides, **env)
    assert name == "pc_reference" and run.problems == []
    config = run.resolved()
    assert config.actor_rollout_ref.actor.policy_loss.loss_mode == "pc_reference"
    assert config.algorithm.row_order == "reference" and config.trainer.n_gpus_per_node == 2
    plan = mini_batch_plan(PCSettings.from_config(config), 2, config.actor_rollout_ref.actor.ppo_mini_batch_size)
    assert (plan.full, plan.partial_rows, plan.mini_rows_per_rank) == (5, 2, 6)  # 32 rows a rank: 5 x 6 + 2


def test_dp8_runs_the_paper_script_scaled_by_overrides_with_the_paper_mini_batch_shape(tmp_path):
    from support import dry_run, stand_in_model, write_parquet_rows

    from recipe.pc.minibatch import mini_batch_plan
    from recipe.pc.settings import PCSettings

    out = subprocess.run(["bash", LAUNCH, "dp8"], env={**os.environ, "DRY_RUN": "1"}, capture_output=True, text=True)
    head, _, command = out.stdout.strip().partition(": ")
    assert head == "start pc_dp8 on GPUs 0,1,2,3,4,5,6,7", out.stderr
    phases = [part for part in command.split("; ") if " bash " in part]
    assert len(phases) == 2 and "echo first: exit code $?" in command and command.endswith("echo resumed: exit code $?")
    for name in ("train", "test"):
        write_parquet_rows(tmp_path / "data" / f"{name}.parquet")
    model = stand_in_model(tmp_path / "model")
    for phase, (steps, mode) in zip(("first", "resumed"), ((4, "disable"), (6, "auto")), strict=True):
        # shlex, as the host's bash -c reads the command (the logger list is quoted against globbing).
        words = shlex.split(phases.pop(0).replace("/tmp/data/calibrated", str(tmp_path / "data")))
        at = words.index("bash")
        env = dict(w.split("=", 1) for w in words[:at])
        assert env["VERL_FILE_LOGGER_PATH"] == f"/tmp/runs/pc_dp8/metrics_{phase}.jsonl"
        assert words[at + 1] == "train_scripts/pc_qwen3-4b_p16c48.sh"
        env.update(MODEL_PATH=model)
        (tmp_path / phase).mkdir()
        run = dry_run("pc_qwen3-4b_p16c48.sh", tmp_path / phase, *words[at + 2 :], **env)
        assert run.problems == [], run.problems
        config = run.resolved()
        assert (config.trainer.nnodes, config.trainer.n_gpus_per_node) == (1, 8)
        assert config.data.max_response_length == 256  # the override, after the script's own 4096
        assert list(config.trainer.logger) == ["console", "file"]
        assert (config.trainer.total_training_steps, config.trainer.resume_mode) == (steps, mode)
        assert config.actor_rollout_ref.actor.policy_loss.loss_mode == "pc_reference"
        plan = mini_batch_plan(PCSettings.from_config(config), 8, config.actor_rollout_ref.actor.ppo_mini_batch_size)
        # The paper's 4B shape at 32 ranks, 256 rows a rank = 5 x 48 + 16, scaled to 8 ranks: 128 = 5 x 24 + 8.
        assert (plan.rows_per_rank, plan.full, plan.mini_rows_per_rank, plan.partial_rows) == (128, 5, 24, 8)


# A stand-in for train_scripts/ray_cluster.sh: records each call's role, environment and arguments.
RAY_CLUSTER_STUB = """#!/usr/bin/env bash
echo "$1 STEPS=${STEPS:-} LOGGER=${VERL_FILE_LOGGER_PATH:-} PORT=$RAY_PORT RAY_TMP=$RAY_TMP ARGS=${*:2}" >> "$CALLS"
"""


def test_two_nodes_trains_then_resumes_on_a_fresh_pair_of_nodes(tmp_path):
    (tmp_path / "train_scripts").mkdir()
    (tmp_path / "train_scripts" / "ray_cluster.sh").write_text(RAY_CLUSTER_STUB)
    calls = tmp_path / "calls.txt"
    env = {**os.environ, "CALLS": str(calls), "OUT_DIR": "/runs/two_nodes"}
    script = os.path.join(ROOT, "scripts", "gpu", "two_nodes.sh")
    out = subprocess.run(["bash", script, "/m", "/d", "a=1"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "first: exit code 0" in out.stdout and "resumed: exit code 0" in out.stdout
    # The workers start in the background.
    wait_until(lambda: calls.read_text().count("worker ") == 2, "two workers started")
    lines = calls.read_text().splitlines()
    workers = [line for line in lines if line.startswith("worker ")]
    heads = [line for line in lines if line.startswith("head ")]
    stops = [line for line in lines if line.startswith("stop ")]
    # Under load the second phase's worker can write its line before the first's: compare them as a set.
    worker_ports = sorted((w.split(" PORT=")[1].split()[0], w.split("RAY_TMP=")[1].split()[0]) for w in workers)
    assert worker_ports == [("7200", "/tmp/rc_worker_first"), ("7300", "/tmp/rc_worker_resumed")]
    assert [s.split("RAY_TMP=")[1].split()[0] for s in stops] == ["/tmp/rc_worker_first", "/tmp/rc_worker_resumed"]
    common = "trainer.nnodes=2 trainer.n_gpus_per_node=1 ray_kwargs.ray_init.num_cpus=null trainer.save_freq=2"
    assert heads == [
        "head STEPS=4 LOGGER=/runs/two_nodes/metrics_first.jsonl PORT=7200 RAY_TMP=/tmp/rc_head_first "
        f"ARGS=train_scripts/smoke_1gpu.sh {common} trainer.resume_mode=disable a=1",
        "head STEPS=6 LOGGER=/runs/two_nodes/metrics_resumed.jsonl PORT=7300 RAY_TMP=/tmp/rc_head_resumed "
        f"ARGS=train_scripts/smoke_1gpu.sh {common} trainer.resume_mode=auto a=1",
    ]


BENCH_PLAN = os.path.join(ROOT, "scripts", "gpu", "bench_plan.txt")
BATCH21 = os.path.join(ROOT, "docs", "results", "regimes", "batch21.txt")


def bench_dry_run(ngpus: str, **env) -> list[str]:
    out = launch("bench", NGPUS=ngpus, DRY_RUN="1", **env)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_bench_runs_each_pre_registered_line_as_written_for_a_few_steps_with_the_fixes_on_or_off(tmp_path):
    from support import dry_run, stand_in_data_dir, stand_in_model

    lines = {line.split()[0]: line.split()[1:] for line in open(BATCH21) if line.strip() and line[0] != "#"}
    plan = [line.split() for line in open(BENCH_PLAN) if line.strip() and line[0] != "#"]
    started = [line for line in bench_dry_run("1") if line.startswith("start ")]
    assert [line.split()[1] for line in started] == [name for _, name, _, _ in plan]
    off = "actor_rollout_ref.model.use_fused_kernels=false trainer.val_metrics=full"
    off += " actor_rollout_ref.model.enable_gradient_checkpointing=true"
    data, model = stand_in_data_dir(tmp_path), stand_in_model(tmp_path)
    checked_kinds = set()
    for line, (_, name, line_name, fixes) in zip(started, plan, strict=True):
        mix, script, *overrides = lines[line_name]
        extra = "trainer.total_training_steps=5" + (f" {off}" if fixes == "off" else "")
        expected = f"DATA_DIR=/tmp/data/{mix} bash train_scripts/{script} {' '.join(overrides)} {extra} "
        assert expected + f"trainer.rollout_data_dir=/tmp/runs/{name}/dump" in line, name
        # Each kind of run's command line composes and passes every start-up check (the last value of a key wins).
        if (script, fixes) in checked_kinds:
            continue
        checked_kinds.add((script, fixes))
        args = line.split(f"bash train_scripts/{script} ")[1].split()
        checked = dry_run(script, tmp_path, *args, MODEL_PATH=model, DATA_DIR=data)
        assert checked.problems == [], (name, checked.problems)
        resolved = checked.resolved()
        assert resolved.trainer.total_training_steps == 5
        assert resolved.actor_rollout_ref.actor.use_fused_kernels == (fixes == "on")
        assert resolved.trainer.val_metrics == ("mean" if fixes == "on" else "full")


def test_bench_puts_each_phase_on_its_own_gpu_or_runs_them_one_after_another_on_one(tmp_path):
    phases = {}
    for line in open(BENCH_PLAN):
        if line.strip() and line[0] != "#":
            phases.setdefault(line.split()[0], []).append(line.split()[1])
    one = bench_dry_run("1")
    assert one[0] == f"GPU 0: phases {' '.join(phases)}"
    # On one GPU: a phase starts after every run of the one before has exited; runs of a phase start 60 s apart.
    expected = []
    for names in phases.values():
        for i, name in enumerate(names):
            expected += ["wait 60 s"] * (i > 0) + [f"start {name} on GPUs 0"]
        expected.append(f"wait for {' '.join(names)} to exit")
    assert [line.split(":")[0] for line in one[1:]] == expected
    many = bench_dry_run(str(len(phases)))
    gpus = {line.split()[1]: line.split()[4].rstrip(":") for line in many if line.startswith("start ")}
    assert [{gpus[name] for name in names} for names in phases.values()] == [{str(i)} for i in range(len(phases))]
    bad = tmp_path / "plan.txt"
    bad.write_text("p g1_grpo_on no_such_line on\n")
    refused = launch("bench", str(bad), NGPUS="1", DRY_RUN="1")
    assert refused.returncode == 2 and "no line no_such_line" in refused.stderr
    unnamed = launch("bench", NGPUS="1", RUNS=str(tmp_path / "runs"), PC_COMMIT="")
    assert unnamed.returncode == 2 and "set PC_COMMIT" in unnamed.stderr and not (tmp_path / "runs").exists()
