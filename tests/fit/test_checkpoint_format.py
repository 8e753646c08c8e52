"""The Pilot-Commit state file: plain data, atomic, cleaned up with verl's retention, and refused when wrong."""

from __future__ import annotations

import os
import re
import shutil
import sys
import types
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from support import FIXTURES, env_file_logger, run_module
from verl import DataProto

from recipe.pc import checkpoint as ckpt
from recipe.pc import convert_state
from recipe.pc.allocators.pilot_store import buffer_from_plain
from recipe.pc.compact import Segment, assemble
from recipe.pc.replay_buffer import BufferEntry
from recipe.pc.testing import assert_resumed_like, build_trainer, fit_run, resume_run
from recipe.pc.testing.standins import StandInActorWorkerGroup


def ckpt_dir(tmp_path):
    return tmp_path / "ckpt"


def state_path(tmp_path, step):
    return ckpt_dir(tmp_path) / f"global_step_{step}" / ckpt.STATE_FILE


def fit(tmp_path, tokenizer, steps, extra=(), **kwargs):
    return fit_run(tmp_path, tokenizer, [f"trainer.total_training_steps={steps}", *extra], **kwargs).trainer


def resume_fails(tmp_path, tokenizer, match, extra=()):
    env_file_logger(tmp_path)
    resumed = build_trainer(tmp_path, tokenizer, extra=["trainer.total_training_steps=6", *extra])
    with pytest.raises(ckpt.CheckpointError, match=match) as refused:
        resumed.fit()
    # Refused before any step: nothing generated, no actor weights loaded.
    assert resumed.async_rollout_manager.calls == []
    assert not hasattr(resumed.actor_rollout_wg, "loaded_step")
    return refused.value


def test_state_file_is_plain_data_and_round_trips(tmp_path, tokenizer):
    trainer = fit(tmp_path, tokenizer, 3, ["trainer.save_freq=3"])
    state = torch.load(state_path(tmp_path, 3), weights_only=True)
    assert state["format"] == ckpt.FORMAT and state["version"] == ckpt.VERSION
    assert state["config"] == {"exploration.n": 4, "exploration.n_effective": 4, "rollout.n": 4}
    assert len(trainer.allocator.buffer) > 0
    assert state["allocator"]["name"] == "pilot_commit"
    entries = buffer_from_plain(state["allocator"]["state"]["buffer"])["entries"]
    assert [e.prompt_id for e in entries] == [e.prompt_id for e in trainer.allocator.buffer.entries()]
    for saved, live in zip(entries, trainer.allocator.buffer.entries(), strict=True):
        assert (saved.inserted_step, saved.insertion_order) == (live.inserted_step, live.insertion_order)
        np.testing.assert_array_equal(saved.metric_values, live.metric_values)
        a = assemble([Segment(saved.payload.round.rollouts, saved.payload.position * 4 + np.arange(4))], None, "a")
        b = assemble([Segment(live.payload.round.rollouts, live.payload.position * 4 + np.arange(4))], None, "b")
        for key in b.batch.keys():
            assert torch.equal(a.batch[key], b.batch[key]), key
        for key in b.non_tensor_batch:
            assert a.non_tensor_batch[key].tolist() == b.non_tensor_batch[key].tolist(), key


def test_plain_encoding_keeps_numpy_types():
    value = {
        "ints": np.arange(3, dtype=np.int32),
        "objects": np.array([{"a": [1, np.float64(2.5)]}, None, "s", (1, 2)], dtype=object),
        "strings": np.array(["x", "yz"]),
        "scalar": np.int64(7),
        1: "non-string key",
        "big": 2**100,
    }
    plain = ckpt.to_plain(value)
    back = ckpt.from_plain(plain)
    assert back["ints"].dtype == np.int32 and back["ints"].tolist() == [0, 1, 2]
    assert back["objects"].dtype == object and back["objects"].tolist() == [{"a": [1, 2.5]}, None, "s", (1, 2)]
    assert type(back["objects"][0]["a"][1]) is np.float64
    assert back["strings"].tolist() == ["x", "yz"] and type(back["scalar"]) is np.int64
    assert back[1] == "non-string key" and back["big"] == 2**100
    with pytest.raises(TypeError, match="state.x: a set cannot be stored"):
        ckpt.to_plain({"x": {1}})


class Payload:
    """Unpickling this calls os.mkdir: the stand-in for code a shared checkpoint could run."""

    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (os.mkdir, (self.target,))


def test_state_that_is_not_plain_data_fails_the_save_naming_its_key_path(tmp_path, tokenizer, monkeypatch):
    """An allocator (or filter) whose state_dict holds objects fails where it saves, naming the key and the helpers
    that make it plain, instead of writing a state whose resume then fails."""
    from recipe.pc.allocators.pilot_commit import PilotCommitAllocator

    rows = DataProto.from_dict(tensors={"x": torch.zeros(2, 1)})
    monkeypatch.setattr(PilotCommitAllocator, "state_dict", lambda self: {"held": rows, "ids": [1, 2]})
    with pytest.raises(ckpt.CheckpointError, match=r"^allocator\.held: a DataProto is not plain data.*proto_to_plain"):
        fit(tmp_path, tokenizer, 2, ["trainer.save_freq=2"])
    assert not state_path(tmp_path, 2).exists()
    for bad, where in (
        ({"a": [1, np.zeros(2)]}, "state.a[1]: a numpy.ndarray"),
        ({"a": {1, 2}}, "state.a: a builtins.set"),
        ({(1, 2): 3}, "state: a key of type tuple"),
    ):
        with pytest.raises(ckpt.CheckpointError, match=re.escape(where)):
            ckpt.check_plain(bad, "state")
    ckpt.check_plain({"a": [1, 2.0, "x", None, True, (torch.ones(1),)], 3: {"b": []}}, "state")  # all plain


def test_a_state_whose_unpickling_would_run_code_is_refused_without_running_it(tmp_path, tokenizer):
    fit(tmp_path, tokenizer, 2, ["trainer.save_freq=2"])
    marker = tmp_path / "code_ran"
    torch.save({"format": ckpt.FORMAT, "version": 1, "payload": Payload(str(marker))}, state_path(tmp_path, 2))
    resume_fails(tmp_path, tokenizer, r"pilot_commit_state.pt holds pickled objects beyond plain data \(.*mkdir")
    assert not marker.exists()


def test_a_save_killed_midway_resumes_from_the_previous_complete_checkpoint(tmp_path, tokenizer, monkeypatch):
    real_save = torch.save

    def dies_at_step_4(obj, f, *args, **kwargs):
        if "global_step_4" in getattr(f, "name", ""):
            f.write(b"PK\x03\x04 half a state")
            raise KeyboardInterrupt("preempted")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(ckpt.torch, "save", dies_at_step_4)
    with pytest.raises(KeyboardInterrupt):
        fit(tmp_path, tokenizer, 4, ["trainer.save_freq=2"])
    monkeypatch.undo()
    assert not os.listdir(state_path(tmp_path, 4).parent)  # neither a state nor a temporary file is left
    assert (ckpt_dir(tmp_path) / "latest_checkpointed_iteration.txt").read_text() == "2"
    resumed = fit_run(tmp_path, tokenizer, ["trainer.save_freq=2", "trainer.total_training_steps=5"])
    full = fit_run(tmp_path / "full", tokenizer, ["trainer.save_freq=2", "trainer.total_training_steps=5"])
    assert_resumed_like(resumed, full, 2)


def test_a_latest_folder_without_state_falls_back_with_a_warning(tmp_path, tokenizer, caplog):
    full = fit_run(tmp_path / "full", tokenizer, ["trainer.save_freq=2", "trainer.total_training_steps=6"])
    cut_dir = tmp_path / "cut"
    cut_dir.mkdir()
    fit(cut_dir, tokenizer, 4, ["trainer.save_freq=2"])
    os.remove(state_path(cut_dir, 4))  # as an older release left it when killed after verl's marker
    with caplog.at_level("WARNING"):
        resumed = fit_run(cut_dir, tokenizer, ["trainer.save_freq=2", "trainer.total_training_steps=6"])
    assert "previous complete one" in caplog.text and "global_step_4" in caplog.text
    assert_resumed_like(resumed, full, 2)


class RotatingActor(StandInActorWorkerGroup):
    """Deletes old actor folders like verl's checkpoint manager: the newest max_ckpt_to_keep saved by this run."""

    saved: list

    def save_checkpoint(self, local_path, hdfs_path=None, global_step=0, max_ckpt_to_keep=None):
        super().save_checkpoint(local_path, hdfs_path, global_step, max_ckpt_to_keep)
        self.saved = [*getattr(self, "saved", []), local_path]
        if max_ckpt_to_keep and len(self.saved) > max_ckpt_to_keep:
            for old in self.saved[:-max_ckpt_to_keep]:
                for name in os.listdir(old):
                    os.remove(os.path.join(old, name))
                os.rmdir(old)
            self.saved = self.saved[-max_ckpt_to_keep:]


def rotating(trainer):
    trainer.actor_rollout_wg.__class__ = RotatingActor
    return trainer


def test_retention_deletes_old_states_with_their_actor_folders(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    extra = ["trainer.save_freq=1", "trainer.max_actor_ckpt_to_keep=2", "trainer.total_training_steps=4"]
    rotating(build_trainer(tmp_path, tokenizer, extra=extra)).fit()
    kept = {step for step in range(1, 5) if state_path(tmp_path, step).exists()}
    assert kept == {3, 4}
    assert all((ckpt_dir(tmp_path) / f"global_step_{s}" / "actor").is_dir() == (s in kept) for s in range(1, 5))


def test_retention_never_deletes_the_state_being_resumed_from(tmp_path, tokenizer):
    fit(tmp_path, tokenizer, 2, ["trainer.save_freq=2"])
    env_file_logger(tmp_path)
    # verl's del_local_ckpt_after_load removes the loaded actor folder; its PC state must stay.
    extra = ["trainer.save_freq=1", "trainer.max_actor_ckpt_to_keep=1", "trainer.total_training_steps=4"]
    resumed = rotating(build_trainer(tmp_path, tokenizer, extra=extra))
    load = resumed.actor_rollout_wg.load_checkpoint

    def load_and_delete(local_path, del_local_after_load=False):
        load(local_path)
        for name in os.listdir(local_path):
            os.remove(os.path.join(local_path, name))
        os.rmdir(local_path)

    resumed.actor_rollout_wg.load_checkpoint = load_and_delete
    resumed.fit()
    assert state_path(tmp_path, 2).exists()
    assert not state_path(tmp_path, 3).exists() and state_path(tmp_path, 4).exists()


def test_truncated_state_is_named(tmp_path, tokenizer):
    fit(tmp_path, tokenizer, 2, ["trainer.save_freq=2"])
    path = state_path(tmp_path, 2)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    err = resume_fails(tmp_path, tokenizer, r"global_step_2/pilot_commit_state.pt is corrupted or truncated")
    assert str(path) in str(err)  # the whole path, so the user knows which file to replace


def test_state_from_another_configuration_is_named(tmp_path, tokenizer):
    fit(tmp_path, tokenizer, 2, ["trainer.save_freq=2"])
    err = resume_fails(
        tmp_path,
        tokenizer,
        r"pilot_commit_state.pt was written with another configuration "
        r"\(exploration.n_effective: saved 4, configured 2\)",
        extra=["algorithm.exploration.n_effective=2", "algorithm.mini_batch_unit=group"],
    )
    assert str(state_path(tmp_path, 2)) in str(err)


def test_a_state_is_checked_against_the_settings_its_allocator_names(tmp_path, tokenizer):
    """Catches: every allocator's state held to Pilot-Commit's buffer settings (a GRPO run refused for a pilot size it
    never uses), or a skipping state saved under a key its filter does not read back."""
    grpo = ["algorithm.rollout_allocation=grpo", "data.gen_batch_size=4", "algorithm.skip.enable=true"]
    fit(tmp_path, tokenizer, 2, ["trainer.save_freq=2", *grpo])
    state = torch.load(state_path(tmp_path, 2), weights_only=True)
    assert state["config"] == {} and "skip" in state
    env_file_logger(tmp_path)
    resumed = build_trainer(tmp_path, tokenizer, extra=[*grpo, "algorithm.exploration.n=8"])
    resumed._load_checkpoint()  # accepted: GRPO's state depends on no pilot setting
    assert resumed.actor_rollout_wg.loaded_step == 2
    saved = state["skip"]
    assert resumed.prompt_filter.skipper.streaks == dict(zip(saved["prompt_id"], saved["streak"], strict=True))


def test_newer_state_version_is_named(tmp_path, tokenizer):
    fit(tmp_path, tokenizer, 2, ["trainer.save_freq=2"])
    path = state_path(tmp_path, 2)
    state = torch.load(path, weights_only=True)
    state["version"] = ckpt.VERSION + 1
    torch.save(state, path)
    err = resume_fails(
        tmp_path, tokenizer, rf"pilot_commit_state.pt has state version {ckpt.VERSION + 1}; this release"
    )
    assert str(path) in str(err)


OLD_MODULE = "recipe.pc.pc_ray_trainer"  # where releases before the plain-data format defined the buffer payloads


@dataclass
class OldPilotRound:
    """The earlier releases' payload classes, pickled under their names (which that module no longer holds)."""

    prompts: DataProto
    rollouts: object  # DataProto rows; CompactRows in the releases that already compacted them
    n_pilot: int


@dataclass(frozen=True)
class OldPilotRef:
    round: OldPilotRound
    position: int


OldPilotRound.__module__ = OldPilotRef.__module__ = OLD_MODULE
OldPilotRound.__qualname__, OldPilotRef.__qualname__ = "PilotRound", "PilotRef"


def write_old_format(path, trainer, compact=False):
    """The state as an earlier release pickled it: buffer entries holding full DataProto rows, or (``compact``) the
    compact rows of the releases just before the plain-data format."""
    rounds = {}
    entries = []
    for e in trainer.allocator.buffer.entries():
        r = e.payload.round
        if id(r) not in rounds:
            rows = r.rollouts if compact else assemble([Segment(r.rollouts)], None, "old rows")
            rounds[id(r)] = OldPilotRound(r.prompts, rows, r.n_pilot)
        ref = OldPilotRef(rounds[id(r)], e.payload.position)
        entries.append(BufferEntry(e.prompt_id, ref, e.metric_values, e.inserted_step, e.insertion_order))
    old_module = types.ModuleType(OLD_MODULE)
    old_module.PilotRound, old_module.PilotRef = OldPilotRound, OldPilotRef
    with pytest.MonkeyPatch.context() as patch:
        # Pickling finds a class through its module; the old names exist only while the file is written.
        patch.setitem(sys.modules, OLD_MODULE, old_module)
        torch.save(
            {
                "buffer": {"entries": entries, "next_order": trainer.allocator.buffer.state_dict()["next_order"]},
                "rng": trainer.rng.bit_generator.state,
                "evict_next_epoch": sorted(trainer.allocator.evict_next_epoch),
                "dataset": trainer.train_dataset.state_dict(),
                **trainer.counters.state_dict(),
            },
            path,
        )
    assert f"{OLD_MODULE}\nPilotRound".encode() in open(path, "rb").read()


@pytest.mark.slow  # four runs: the whole, its first half, a resume from each converted layout
def test_old_pickle_state_is_refused_with_the_conversion_command_which_then_resumes_exactly(
    tmp_path, tokenizer, capsys
):
    full = fit_run(tmp_path / "full", tokenizer, ["trainer.save_freq=3", "trainer.total_training_steps=6"])
    cut_dir = tmp_path / "cut"
    cut_dir.mkdir()
    first = fit(cut_dir, tokenizer, 3, ["trainer.save_freq=3"])
    path = state_path(cut_dir, 3)
    saved = torch.load(path, weights_only=True)
    compact_folder = tmp_path / "compact" / "global_step_3"
    shutil.copytree(path.parent, compact_folder)
    write_old_format(path, first)
    write_old_format(compact_folder / ckpt.STATE_FILE, first, compact=True)
    resume_fails(
        cut_dir, tokenizer, r"releases before the plain-data format .* python -m recipe.pc.convert_state .*--rollout-n"
    )

    assert run_module("recipe.pc.convert_state", str(path), "--rollout-n", "4") == 0
    assert "converted" in capsys.readouterr().out and os.path.exists(f"{path}.pickle-backup")
    assert convert_state.main([str(compact_folder / ckpt.STATE_FILE), "--rollout-n", "4"]) == 0
    for converted in (path, compact_folder / ckpt.STATE_FILE):
        assert_same_plain(torch.load(converted, weights_only=True), saved)
    capsys.readouterr()
    assert convert_state.main([str(path), "--rollout-n", "4"]) == 0  # a current-format file is left as it is
    assert "nothing to do" in capsys.readouterr().out
    assert_same_plain(torch.load(path, weights_only=True), saved)
    extra = ["trainer.save_freq=3", "trainer.total_training_steps=6"]
    assert_resumed_like(fit_run(cut_dir, tokenizer, extra), full, 3)
    assert_resumed_like(resume_run(tmp_path / "compact_resumed", tokenizer, extra, compact_folder), full, 3)


def assert_same_plain(a, b, where="state"):
    """Two plain-data states hold the same keys, values and tensors."""
    assert type(a) is type(b), where
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same_plain(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_plain(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), where
    else:
        assert a == b, where


@pytest.mark.parametrize("fixture", ["state_v1", "state_v1_evict"])
def test_a_version_1_state_still_resumes(tmp_path, tokenizer, fixture):
    """States written before the allocator had a key of its own (buffer, evictions, screens at the top level)
    load into the same trainer state: the summary printed when they were saved."""
    import json

    folder = os.path.join(FIXTURES, fixture)
    expected = json.load(open(os.path.join(folder, "expected.json")))
    env_file_logger(tmp_path)
    trainer = build_trainer(tmp_path, tokenizer, extra=expected["overrides"])
    state = ckpt.read_state(os.path.join(folder, ckpt.STATE_FILE), trainer._state_config())
    assert torch.load(os.path.join(folder, ckpt.STATE_FILE), weights_only=True)["version"] == 1
    assert state["version"] == ckpt.VERSION and state["allocator"]["name"] == "pilot_commit"
    trainer.allocator.load_state_dict(state["allocator"]["state"])
    trainer._load_pc_state(state)
    assert trainer._pc_state_summary() == expected["summary"]


def test_a_state_with_both_round_counters_loads_into_the_one_and_is_refused_when_they_differ():
    """States written before the trainer kept one round counter hold gen_round and total_sampling_rounds."""
    from recipe.pc.step import RunCounters

    saved = torch.load(os.path.join(FIXTURES, "state_v1", ckpt.STATE_FILE), weights_only=True)["counters"]
    counters = RunCounters()
    counters.load_state_dict(saved)
    assert counters.gen_round == saved["gen_round"] == saved["total_sampling_rounds"] == 7
    assert "total_sampling_rounds" not in counters.state_dict()
    with pytest.raises(ValueError, match="^its round counters gen_round and total_sampling_rounds differ"):
        RunCounters().load_state_dict({**saved, "total_sampling_rounds": 8})


def test_a_state_of_another_allocator_is_refused_before_any_step(tmp_path, tokenizer):
    fit(tmp_path, tokenizer, 2, ["trainer.save_freq=2"])
    err = resume_fails(
        tmp_path,
        tokenizer,
        "written by algorithm.rollout_allocation=pilot_commit, not dapo",
        extra=["algorithm.rollout_allocation=dapo"],
    )
    # The message names the state file and the way out.
    assert "global_step_2/pilot_commit_state.pt was written by" in str(err)
    assert str(err).endswith("resume with the allocator it was saved with")


def test_screens_waiting_in_a_state_are_refused_under_another_screen_size_before_any_step(tmp_path, tokenizer):
    """Catches: pending screens completed with another ``screen_n`` (every such pilot misaligned), refused only
    after verl loaded the actor, or every change of ``screen_n`` refused (with no screen pending it may change)."""
    fit(tmp_path, tokenizer, 4, ["trainer.save_freq=1", "algorithm.exploration.screen_n=2"])
    waiting = [s for s in range(1, 5) if "screened" in torch.load(state_path(tmp_path, s))["allocator"]["state"]]
    assert waiting  # the run this test needs: some step ends with screens waiting
    pending = torch.load(state_path(tmp_path, waiting[0]))["allocator"]["state"]["screened"]
    count = len(ckpt.proto_from_plain(pending["prompts"]))
    resume = ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={state_path(tmp_path, waiting[0]).parent}"]
    for screen_n, now in (("3", "is 3"), ("null", "is off")):
        err = resume_fails(
            tmp_path,
            tokenizer,
            rf"holds {count} screened pilots of 2 rollouts waiting for the rest, but algorithm.exploration.screen_n "
            rf"{now}; resume with algorithm.exploration.screen_n=2$",
            extra=[*resume, f"algorithm.exploration.screen_n={screen_n}"],
        )
        assert str(state_path(tmp_path, waiting[0])) in str(err)
    # No screen pending (saved with screening off): screening may start on the resume.
    plain = tmp_path / "plain"
    fit(plain, tokenizer, 2, ["trainer.save_freq=2"])
    env_file_logger(plain)
    resumed = build_trainer(
        plain, tokenizer, extra=["trainer.total_training_steps=4", "algorithm.exploration.screen_n=2"]
    )
    resumed._load_checkpoint()
    assert resumed.actor_rollout_wg.loaded_step == 2 and resumed.allocator.screened is None


SCREEN_2 = ["algorithm.exploration.screen_n=2"]


def test_damaged_screens_in_a_state_are_named_malformed(tmp_path, tokenizer):
    """Catches: rows that do not split evenly over the screened prompts read as some screen size."""
    fit(tmp_path, tokenizer, 4, ["trainer.save_freq=1", "algorithm.exploration.screen_n=2"])
    step = next(s for s in range(1, 5) if "screened" in torch.load(state_path(tmp_path, s))["allocator"]["state"])
    state = torch.load(state_path(tmp_path, step))
    screened = state["allocator"]["state"]["screened"]
    rows = ckpt.proto_from_plain(screened["rows"])
    screened["rows"] = ckpt.proto_to_plain(rows.select_idxs(list(range(len(rows) - 1))))
    torch.save(state, state_path(tmp_path, step))
    folder = state_path(tmp_path, step).parent
    err = resume_fails(
        tmp_path,
        tokenizer,
        rf"is malformed: ValueError: its screened pilots hold {len(rows) - 1} rollouts for",
        extra=[
            "trainer.resume_mode=resume_path",
            f"trainer.resume_from_path={folder}",
            "algorithm.exploration.screen_n=2",
        ],
    )
    assert str(state_path(tmp_path, step)) in str(err)
