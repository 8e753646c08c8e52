"""train_scripts/common_1gpu.sh with RAY_TMP set: each job runs on a Ray head of its own, claimed through a host-wide
slot, and its driver gets a Ray job id no other live job on the host has. verl names the socket of its weight sync
to vLLM by that id (ipc:///tmp/rl-colocate-zmq-<job id>-...), so two jobs that were both 01000000 (the first job of
any fresh Ray) shared one socket and one hung. The trainer is replaced by a stand-in (TRAINER_CMD) that connects
through RAY_ADDRESS as main_pc's driver would and reports what it got."""

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
from support import ROOT

SMOKE = os.path.join(ROOT, "train_scripts", "smoke_1gpu.sh")

# Writes {job, address, session dir, argv} to $STANDIN_OUT/<RAY_TMP's name>.json, waits until $STANDIN_WAIT records
# are there (so the jobs are provably alive at once), then exits with $STANDIN_RC.
STANDIN = """
import json, os, sys, time
import ray

ray.init(logging_level="ERROR")  # RAY_ADDRESS: the launcher's head, as for main_pc's driver
record = {
    "job": ray.get_runtime_context().get_job_id(),
    "address": os.environ["RAY_ADDRESS"],
    "session": ray._private.worker._global_node.get_session_dir_path(),
    "argv": sys.argv[1:],
}
out = os.environ["STANDIN_OUT"]
with open(os.path.join(out, os.path.basename(os.environ["RAY_TMP"]) + ".json"), "w") as f:
    json.dump(record, f)
deadline = time.time() + 60
while len(os.listdir(out)) < int(os.environ["STANDIN_WAIT"]) and time.time() < deadline:
    time.sleep(0.2)
sys.exit(int(os.environ.get("STANDIN_RC", "0")))
"""


@pytest.fixture
def short_tmp():
    # Ray's unix sockets live under the temp dir, and socket paths are limited to 107 bytes: a short folder.
    path = tempfile.mkdtemp(prefix="sbs", dir="/tmp")
    yield path
    subprocess.run(["pkill", "-KILL", "-f", path], capture_output=True)
    shutil.rmtree(path, ignore_errors=True)


def _launch(tmp, name, wait=1, rc=0):
    """Start smoke_1gpu.sh as job NAME (RAY_TMP=<tmp>/NAME) with the stand-in trainer, on CPU only."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "DRY_RUN", "VERL_FILE_LOGGER_PATH")}
    env.update(
        PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
        RAY_AUTH_MODE="disabled",
        RAY_TMP=os.path.join(tmp, name),
        PC_SLOT_DIR=os.path.join(tmp, "slots"),
        OUT_DIR=os.path.join(tmp, "out_" + name),
        DATA_DIR=os.path.join(tmp, "data"),  # never read by the stand-in
        CUDA_VISIBLE_DEVICES="",  # a head with 0 GPUs
        RAY_NUM_CPUS="1",
        TRAINER_CMD=f"{sys.executable} {os.path.join(tmp, 'standin.py')}",
        STANDIN_OUT=os.path.join(tmp, "records"),
        STANDIN_WAIT=str(wait),
        STANDIN_RC=str(rc),
    )
    return subprocess.Popen(["bash", SMOKE], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(process):
    out, err = process.communicate(timeout=150)
    return process.returncode, err


def _held_slots(slot_dir, slots, timeout=30.0):
    """The slots among ``slots`` still locked after ``timeout`` s. A job's lock goes with its last process, and a
    process that is exiting has already lost its command line (ps no longer names it) before its files are closed."""
    deadline = time.time() + timeout
    while True:
        held = []
        for k in slots:
            with open(os.path.join(slot_dir, str(k)), "a") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    held.append(k)
        if not held or time.time() > deadline:
            return held
        time.sleep(0.2)


def _processes_naming(path):
    out = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if path in line]


def _records(tmp):
    folder = os.path.join(tmp, "records")
    records = {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            records[name.removesuffix(".json")] = json.load(f)
        os.remove(os.path.join(folder, name))
    return records


@pytest.mark.slow  # a minute: two Ray heads and jobs
def test_two_side_by_side_jobs_get_their_own_head_and_job_id(short_tmp):
    with open(os.path.join(short_tmp, "standin.py"), "w") as f:
        f.write(STANDIN)
    os.mkdir(os.path.join(short_tmp, "records"))
    jobs = {name: _launch(short_tmp, name, wait=2) for name in ("a", "b")}
    errs = {}
    for name, job in jobs.items():
        rc, errs[name] = _finish(job)
        assert rc == 0, errs[name][-3000:]
    records = _records(short_tmp)
    assert set(records) == {"a", "b"}
    # Slots 1 and 2 (which job got which is a race): heads at 10000 + 420k, trainers at job 32 + k (hex little-endian).
    assert {r["address"] for r in records.values()} == {"127.0.0.1:10420", "127.0.0.1:10840"}
    assert {r["job"] for r in records.values()} == {"21000000", "22000000"}
    for name, record in records.items():
        assert record["session"].startswith(os.path.join(short_tmp, name) + "/")  # its own head, not the other's
        k = {"127.0.0.1:10420": 1, "127.0.0.1:10840": 2}[record["address"]]
        assert f"Ray slot {k} " in errs[name]
        assert f"the trainer will be job {record['job']}" in errs[name]
        assert "ray_kwargs.ray_init.num_cpus=null" in record["argv"]  # Ray refuses num_cpus when connecting
        assert not any("_temp_dir" in arg for arg in record["argv"])
    for name in ("a", "b"):
        assert _processes_naming(os.path.join(short_tmp, name)) == [], "a head outlived its job"

    # Both slots were released, and a third job gets slot 1 again; its trainer's failure is the launcher's exit
    # status, and its head is stopped all the same.
    assert _held_slots(os.path.join(short_tmp, "slots"), (1, 2)) == [], "a slot outlived its job"
    rc, err = _finish(_launch(short_tmp, "c", rc=3))
    assert rc == 3, err[-3000:]
    assert "Ray slot 1 " in err
    assert _records(short_tmp)["c"]["job"] == "21000000"
    assert _processes_naming(os.path.join(short_tmp, "c")) == []


def test_no_free_slot_is_a_clear_error(short_tmp):
    slots = os.path.join(short_tmp, "slots")
    os.mkdir(slots)
    held = []
    try:
        for k in range(1, 33):  # every slot held by a live "job" (this process)
            f = open(os.path.join(slots, str(k)), "a")
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(f)
        rc, err = _finish(_launch(short_tmp, "d"))
    finally:
        for f in held:
            f.close()
    assert rc != 0
    assert f"no free Ray slot: all 32 lock files in PC_SLOT_DIR={slots} are held" in err
    assert not os.path.exists(os.path.join(short_tmp, "d"))  # no head was started
