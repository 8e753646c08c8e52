"""docs/gpu-checks/pieces.sh: the bundle and the GGUF cut into pieces that each fit a device call beside the working
tree, and joined back byte for byte on the host; a lost piece or a mismatched bundle is named before anything
long runs."""

import hashlib
import math
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "docs", "gpu-checks", "pieces.sh")
LIMIT = 100_000


def fake_bundle(tmp_path, sizes=(150_000, 70_000), sha_ok=True):
    """build_bundle.sh's layout: p01/bundle.part.00, p02/bundle.part.01, bundle.tar.xz.sha256."""
    bundle = tmp_path / "bundle"
    data = b""
    for i, size in enumerate(sizes):
        part = os.urandom(size)
        data += part
        (bundle / f"p{i + 1:02d}").mkdir(parents=True)
        (bundle / f"p{i + 1:02d}" / f"bundle.part.{i:02d}").write_bytes(part)
    digest = hashlib.sha256(data if sha_ok else b"other").hexdigest()
    (bundle / "bundle.tar.xz.sha256").write_text(f"{digest}  bundle.tar.xz\n")
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(os.urandom(90_001))
    return bundle, gguf, data


def pieces(tmp_path, *args, **env):
    full = {
        **os.environ,
        "TREE_BYTES": "0",
        "TRANSFER_LIMIT": str(LIMIT),
        "MARGIN": "0",
        "PIECES_DIR": str(tmp_path / "host_pieces"),
        "BUNDLE_PIECES": str(tmp_path / "bundle-pieces"),
        "GGUF_OUT": str(tmp_path / "smollm2.gguf"),
        **env,
    }
    return subprocess.run(["bash", SCRIPT, *map(str, args)], env=full, capture_output=True, text=True)


def test_pack_cuts_pieces_that_fit_and_join_restores_bundle_and_gguf(tmp_path):
    bundle, gguf, data = fake_bundle(tmp_path)
    out = tmp_path / "out"
    packed = pieces(tmp_path, "pack", bundle, gguf, out)
    assert packed.returncode == 0, packed.stderr
    total = len(data) + gguf.stat().st_size
    n = math.ceil(total / LIMIT)
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert folders == [f"c{i}" for i in range(1, n + 1)]
    assert all(f.stat().st_size <= LIMIT for d in out.glob("c*") for f in d.iterdir())
    assert (out / "manifest").read_text() == f"bundle_bytes={len(data)}\ngguf_bytes={gguf.stat().st_size}\npieces={n}\n"
    calls = [line for line in packed.stdout.splitlines() if "pieces.sh stash" in line]
    assert len(calls) == n and "pieces.sh join" in calls[-1] and "join" not in "".join(calls[:-1])
    for i in range(1, n + 1):
        assert pieces(tmp_path, "stash", out / f"c{i}").returncode == 0
    joined = pieces(tmp_path, "join", out / "manifest")
    assert joined.returncode == 0, joined.stderr
    assert (tmp_path / "bundle-pieces" / "bundle.part.00").read_bytes() == data
    assert (tmp_path / "smollm2.gguf").read_bytes() == gguf.read_bytes()
    assert list((tmp_path / "host_pieces").iterdir()) == []  # nothing left to join twice


def test_pieces_leave_room_for_the_working_tree_and_the_margin(tmp_path):
    bundle, gguf, _ = fake_bundle(tmp_path)
    out = tmp_path / "out"
    assert pieces(tmp_path, "pack", bundle, gguf, out, TREE_BYTES="30000", MARGIN="10000").returncode == 0
    assert max(f.stat().st_size for d in out.glob("c*") for f in d.iterdir()) == LIMIT - 40_000
    refused = pieces(tmp_path, "pack", bundle, gguf, tmp_path / "o2", TREE_BYTES=str(LIMIT - 1000))
    assert refused.returncode == 2 and "leaves no room for a piece" in refused.stderr
    # The bundle's parts and the GGUF together (310,001 bytes) need 4 calls of 100,000: 3 are too few.
    assert pieces(tmp_path, "pack", bundle, gguf, tmp_path / "o3", MAX_CALLS="3").returncode == 2
    assert pieces(tmp_path, "pack", bundle, gguf, tmp_path / "o4", MAX_CALLS="4").returncode == 0


def test_join_names_the_missing_piece_and_writes_nothing(tmp_path):
    bundle, gguf, _ = fake_bundle(tmp_path)
    out = tmp_path / "out"
    assert pieces(tmp_path, "pack", bundle, gguf, out).returncode == 0
    n = len(list(out.glob("c*")))
    for i in (1, *range(3, n + 1)):  # c2 never arrived
        assert pieces(tmp_path, "stash", out / f"c{i}").returncode == 0
    joined = pieces(tmp_path, "join", out / "manifest")
    assert joined.returncode == 2 and f"holds {n - 1} of {n} pieces; missing: c2" in joined.stderr
    assert not (tmp_path / "smollm2.gguf").exists() and not (tmp_path / "bundle-pieces").exists()


def test_join_refuses_pieces_of_another_pack(tmp_path):
    bundle, gguf, _ = fake_bundle(tmp_path)
    assert pieces(tmp_path, "pack", bundle, gguf, tmp_path / "out").returncode == 0
    for d in sorted((tmp_path / "out").glob("c*")):
        assert pieces(tmp_path, "stash", d).returncode == 0
    manifest = tmp_path / "other_manifest"
    text = (tmp_path / "out" / "manifest").read_text()
    manifest.write_text(text.replace("gguf_bytes=90001", "gguf_bytes=90000"))
    joined = pieces(tmp_path, "join", manifest)
    assert joined.returncode == 2 and "pack and send them again" in joined.stderr
    assert not (tmp_path / "smollm2.gguf").exists()


@pytest.mark.parametrize("broken", ["sha", "no_parts", "no_gguf"])
def test_pack_refuses_a_bundle_or_gguf_it_cannot_use(tmp_path, broken):
    bundle, gguf, _ = fake_bundle(tmp_path, sha_ok=broken != "sha")
    if broken == "no_parts":
        for part in bundle.glob("p*/bundle.part.*"):
            part.unlink()
    if broken == "no_gguf":
        gguf.unlink()
    packed = pieces(tmp_path, "pack", bundle, gguf, tmp_path / "out")
    expected = {"sha": "do not match", "no_parts": "no p*/bundle.part.*", "no_gguf": "no GGUF"}[broken]
    assert packed.returncode == 2 and expected in packed.stderr
    assert not (tmp_path / "out").exists()  # no half-built pieces to carry by mistake


def test_stash_says_when_a_call_carried_no_piece(tmp_path):
    (tmp_path / "empty").mkdir()
    stashed = pieces(tmp_path, "stash", tmp_path / "empty")
    assert stashed.returncode == 2 and "was it named in the call's carry?" in stashed.stderr
