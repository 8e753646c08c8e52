"""train_scripts/ray_cluster.sh on one machine: two Ray nodes with their own ports and temp dirs form one cluster,
the head runs a script once both nodes' GPUs are visible, and `stop` ends only the nodes the script started."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest
from support import TRAIN_SCRIPTS, wait_until

SCRIPT = os.path.join(TRAIN_SCRIPTS, "ray_cluster.sh")


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


def _free_port_blocks(count: int, size: int = 420) -> list[int]:
    """First ports of ``count`` blocks of ``size`` ports that nothing holds now (a leftover node of an earlier run
    included). They lie below the kernel's ephemeral range, so no connection or bind-to-0 is handed one meanwhile,
    above the side-by-side launcher's slot ports (10420-23850), and clear of Ray's defaults (6379, 8265,
    10001-19999, 52365)."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        top = min(32768, int(f.read().split()[0]))
    blocks, base = [], 24000
    while len(blocks) < count and base + size <= top:
        if all(_port_free(p) for p in range(base, base + size)):
            blocks.append(base)
        base += size
    assert len(blocks) == count, f"no {count} free blocks of {size} ports in 24000-{top}"
    return blocks


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def _node_ports(base: int) -> list[str]:
    """Every port a node opens, from ``base`` on: ray_cluster.sh's start_node layout, for the bystander that the
    script must not start. Left to Ray, these are picked free and bound later, and a loaded machine widens that gap."""
    return [
        f"--node-manager-port={base}",
        f"--object-manager-port={base + 1}",
        f"--dashboard-agent-listen-port={base + 2}",
        f"--dashboard-agent-grpc-port={base + 3}",
        f"--metrics-export-port={base + 4}",
        f"--runtime-env-agent-port={base + 5}",
        f"--ray-client-server-port={base + 6}",
        f"--min-worker-port={base + 10}",
        f"--max-worker-port={base + 409}",
    ]


@pytest.mark.slow  # a minute: two Ray nodes start and stop
def test_two_nodes_on_one_host_and_stop_touches_only_its_own(tmp_path):
    # Short temp dirs: Ray's unix sockets live under them and socket paths are limited to 107 bytes.
    short = tempfile.mkdtemp(prefix="rc", dir="/tmp")
    bystander, w, h = (os.path.join(short, d) for d in ("b", "w", "h"))
    by_port, head_port, worker_base = _free_port_blocks(3)
    # The bystander in a session of its own: its renamed agents and client server do not name its temp dir, and
    # ending the session is what ends them all (they held ports after a run, for the next one to trip over).
    start = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", f"--port={by_port}"]
    start += [f"--temp-dir={bystander}", "--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats"]
    starter = subprocess.Popen(
        [*start, *_node_ports(by_port + 1)],
        env=_env(tmp_path),
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    worker = None
    try:
        out, _ = starter.communicate(timeout=300)
        assert starter.returncode == 0, out
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
                RAY_PORT=str(head_port),
                NODE_PORT_BASE=str(worker_base),
                RAY_TMP=w,
                DETACH="1",
                WAIT_HEAD_S="600",
                # A raylet whose GCS is gone exits after this many seconds (Ray's default 60): the worker must
                # outlive the head's stop however slowly this machine gets to the checks below.
                RAY_gcs_rpc_server_reconnect_timeout_s="3600",
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        # The worker starts first and waits for the head, as under a scheduler: its wait loop is running.
        waiting = ["pgrep", "-P", str(worker.pid), "-f", f"^python3 - 127.0.0.1 {head_port} "]
        wait_until(lambda: subprocess.run(waiting, capture_output=True).returncode == 0, "the worker never waited")
        head = subprocess.run(
            ["bash", SCRIPT, "head", str(probe)],
            env=_env(tmp_path, NNODES="2", RAY_PORT=str(head_port), RAY_TMP=h),
            capture_output=True,
            text=True,
            timeout=600,
        )
        worker_out, _ = worker.communicate(timeout=600)
        assert head.returncode == 0, head.stdout + head.stderr
        assert worker.returncode == 0, worker_out
        assert "NODES 2 GPUS 2" in head.stdout
        assert "stopped 1 Ray node(s)" in head.stdout  # the head stopped its own node when the script ended
        assert w in _raylet_temp_dirs()  # ... and left the worker node alone
        stop = subprocess.run(["bash", SCRIPT, "stop"], env=_env(tmp_path, RAY_TMP=w), capture_output=True, text=True)
        assert "stopped 1 Ray node(s)" in stop.stdout, stop.stdout + stop.stderr
        # A killed raylet still lists its arguments until it has exited: wait for that, not for a fixed time.
        wait_until(
            lambda: not any(d.startswith((w, h)) for d in _raylet_temp_dirs()), "a stopped node's raylet still runs"
        )
        assert bystander in _raylet_temp_dirs()  # a Ray this script did not start keeps running
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait()
        for node_tmp in (w, h):  # what the script started: each node's whole session
            subprocess.run(["bash", SCRIPT, "stop"], env=_env(tmp_path, RAY_TMP=node_tmp), capture_output=True)
        subprocess.run(["pkill", "-KILL", "-s", str(starter.pid)], capture_output=True)
        subprocess.run(["pkill", "-KILL", "-f", short], capture_output=True)
        shutil.rmtree(short, ignore_errors=True)
