"""train_scripts/ray_cluster.sh on one machine: two Ray nodes with their own ports and temp dirs form one cluster,
the head runs a script once both nodes' GPUs are visible, and `stop` ends only the nodes the script started."""

import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "train_scripts", "ray_cluster.sh")


def _env(tmp_path, **extra):
    env = {
        **os.environ,
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
        "RAY_CLI": f"{sys.executable} -m ray.scripts.scripts",
        "RAY_AUTH_MODE": "disabled",
        "NODE_IP": "127.0.0.1",
        "NGPUS_PER_NODE": "1",  # a logical resource: no GPU is needed to declare it
        "NUM_CPUS": "1",
    }
    env.update(extra)
    return env


def _raylet_temp_dirs() -> list[str]:
    out = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    return [
        arg.split("=", 1)[1]
        for line in out.splitlines()
        if "raylet" in line
        for arg in line.split()
        if arg.startswith("--temp-dir=")
    ]


def test_two_nodes_on_one_host_and_stop_touches_only_its_own(tmp_path):
    # Short temp dirs: Ray's unix sockets live under them and socket paths are limited to 107 bytes.
    short = tempfile.mkdtemp(prefix="rc", dir="/tmp")
    bystander = os.path.join(short, "b")
    start = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--port=7411", f"--temp-dir={bystander}"]
    start += ["--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats"]
    subprocess.run(start, env=_env(tmp_path), check=True, capture_output=True, timeout=120)
    try:
        probe = tmp_path / "probe.sh"
        probe.write_text(
            "python3 -c \"import ray; ray.init(logging_level='ERROR'); "
            "print('NODES', sum(n['Alive'] for n in ray.nodes()), 'GPUS', int(ray.cluster_resources()['GPU']))\"\n"
        )
        worker = subprocess.Popen(
            ["bash", SCRIPT, "worker"],
            env=_env(
                tmp_path,
                HEAD_ADDR="127.0.0.1",
                RAY_PORT="7500",
                NODE_PORT_BASE="7000",
                RAY_TMP=os.path.join(short, "w"),
                DETACH="1",
                WAIT_HEAD_S="200",
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        time.sleep(1)  # the worker starts first and waits for the head, as under a scheduler
        head = subprocess.run(
            ["bash", SCRIPT, "head", str(probe)],
            env=_env(tmp_path, NNODES="2", RAY_PORT="7500", RAY_TMP=os.path.join(short, "h")),
            capture_output=True,
            text=True,
            timeout=300,
        )
        worker.communicate(timeout=60)
        assert head.returncode == 0, head.stdout + head.stderr
        assert "NODES 2 GPUS 2" in head.stdout
        assert "stopped 1 Ray node(s)" in head.stdout  # the head stopped its own node when the script ended
        assert os.path.join(short, "w") in _raylet_temp_dirs()  # ... and left the worker node alone
        stop = subprocess.run(
            ["bash", SCRIPT, "stop"],
            env=_env(tmp_path, RAY_TMP=os.path.join(short, "w")),
            capture_output=True,
            text=True,
        )
        assert "stopped 1 Ray node(s)" in stop.stdout
        left = _raylet_temp_dirs()
        assert bystander in left  # a Ray this script did not start keeps running
        assert not any(d.startswith((os.path.join(short, "w"), os.path.join(short, "h"))) for d in left)
    finally:
        subprocess.run(["pkill", "-KILL", "-f", short], capture_output=True)
        shutil.rmtree(short, ignore_errors=True)
