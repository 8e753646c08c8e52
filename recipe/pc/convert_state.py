"""Convert a Pilot-Commit state written by an earlier release (a full pickle) to the current format.

Unpickling runs code from the file: run this only on a checkpoint you trust.

    python -m recipe.pc.convert_state CKPT/global_step_N/pilot_commit_state.pt --rollout-n 96 [--n-effective 32]

The old file is kept as ``<name>.pickle-backup``; the converted state takes its place.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import types

import torch

from recipe.pc import checkpoint as ckpt
from recipe.pc.allocators.pilot_store import PilotRef, PilotRound, buffer_to_plain
from recipe.pc.compact import CompactRows
from recipe.pc.replay_buffer import BufferEntry

# Earlier releases defined the buffer payloads in the trainer module, and their pickles name them there.
MOVED_CLASSES = {
    ("recipe.pc.pc_ray_trainer", "PilotRound"): PilotRound,
    ("recipe.pc.pc_ray_trainer", "PilotRef"): PilotRef,
}


class OldStateUnpickler(pickle.Unpickler):
    """Resolves the classes that have moved since an old state was pickled to where they live now."""

    def find_class(self, module, name):
        moved = MOVED_CLASSES.get((module, name))
        return moved if moved is not None else super().find_class(module, name)


# torch.load takes a pickle module and unpickles a (zip-format, as torch.save writes) file with its Unpickler.
OLD_STATE_PICKLE = types.SimpleNamespace(__name__="old_state_pickle", Unpickler=OldStateUnpickler)


def convert(old: dict, rollout_n: int, n_effective: int | None, exploration_n: int | None = None) -> dict:
    """The current-format state of an old state dict (buffer payloads holding full DataProto rows, or, from the
    releases that compacted them, ``CompactRows``)."""
    entries = old["buffer"]["entries"]
    rounds, n_pilot = {}, set()
    new_entries = []
    for e in entries:
        ref = e.payload
        key = id(ref.round)
        if key not in rounds:
            old_round = ref.round
            n_pilot.add(old_round.n_pilot)
            rollouts = old_round.rollouts
            if not isinstance(rollouts, CompactRows):
                rollouts = CompactRows.from_proto(rollouts, old_round.n_pilot)
            rounds[key] = PilotRound(old_round.prompts, rollouts, old_round.n_pilot)
        new_entries.append(
            BufferEntry(
                e.prompt_id, PilotRef(rounds[key], ref.position), e.metric_values, e.inserted_step, e.insertion_order
            )
        )
    if len(n_pilot) > 1:
        raise ValueError(f"pilot rounds of different sizes {sorted(n_pilot)}")
    if exploration_n is not None:
        n_pilot.add(exploration_n)
    if len(n_pilot) > 1:
        raise ValueError(f"--exploration-n={exploration_n} but the buffered pilot groups hold {sorted(n_pilot)} rows")
    if not n_pilot:
        raise ValueError("the buffer is empty, so exploration.n cannot be read from it: pass --exploration-n")
    pilot = n_pilot.pop()
    return {
        "format": ckpt.FORMAT,
        "version": ckpt.VERSION,
        "config": {
            "exploration.n": pilot,
            "exploration.n_effective": pilot if n_effective is None else n_effective,
            "rollout.n": rollout_n,
        },
        "allocator": {
            "name": "pilot_commit",
            "state": {
                "buffer": buffer_to_plain(new_entries, old["buffer"]["next_order"]),
                "evict_next_epoch": sorted(int(i) for i in old["evict_next_epoch"]),
            },
        },
        "rng": ckpt.to_plain(old["rng"], "rng"),
        "dataset": ckpt.to_plain(old["dataset"], "dataset"),
        "counters": {
            name: int(old[name])
            for name in (
                "epoch",
                "gen_round",
                "cumulative_rollouts",
                "cumulative_trained_rollouts",
                "total_consumed_prompts",
            )
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", help="the old pilot_commit_state.pt")
    ap.add_argument("--rollout-n", type=int, required=True, help="actor_rollout_ref.rollout.n of the run that wrote it")
    ap.add_argument("--n-effective", type=int, default=None, help="algorithm.exploration.n_effective (default: n)")
    ap.add_argument("--exploration-n", type=int, default=None, help="algorithm.exploration.n (read from the buffer)")
    args = ap.parse_args(argv)
    if not os.path.isfile(args.path):
        ap.error(f"{args.path} does not exist")
    # The one deliberate full unpickle: the user vouches for this file by running the converter on it.
    try:
        old = torch.load(args.path, weights_only=False, map_location="cpu", pickle_module=OLD_STATE_PICKLE)
    except Exception as err:  # a truncated or foreign file fails in torch's reader or the unpickler, in many ways
        print(f"cannot read {args.path} as a torch.save file: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    if isinstance(old, dict) and old.get("format") == ckpt.FORMAT:
        print(f"{args.path} is already in format version {old.get('version')}; nothing to do")
        return 0
    try:
        state = convert(old, args.rollout_n, args.n_effective, args.exploration_n)
    except (KeyError, AttributeError, TypeError, ValueError) as err:
        print(f"cannot convert {args.path}: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    backup = args.path + ".pickle-backup"
    os.replace(args.path, backup)
    ckpt.write_state(state, args.path)
    print(f"converted {args.path} to format version {ckpt.VERSION} (old file kept as {backup})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
