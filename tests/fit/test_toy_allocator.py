"""A new allocator is one module and its registration: the example of docs/architecture.md, run as written from a
temporary module, trains through the real fit() on the stand-ins, resumes like an uninterrupted run, stops cleanly when
it leaves every prompt out, and is simulated and planned through the public tools, with no change to the trainer, the
settings or the simulator."""

import importlib
import os
import re
import sys

import numpy as np
import pytest
from support import (
    FIXTURES,
    ROOT,
    B,
    G,
    assert_resumed_like,
    build_trainer,
    compose_pc_config,
    env_file_logger,
    fit_run,
    resume_run,
    step_records,
)

from recipe.pc import metric_names as names
from recipe.pc.main_pc import unknown_key_problems
from recipe.pc.registry import ALLOCATORS, KEY_GROUPS, registrations_undone
from recipe.pc.settings import PCConfigError, PCSettings
from recipe.pc_tools import plan
from recipe.pc_tools.costmodel import Registered, simulate

TOY = "skip_agreed"
USE_TOY = [f"algorithm.rollout_allocation={TOY}"]
N = 4  # rollout.n in build_trainer


def documented_example(section: str) -> str:
    """The python block of a section of docs/architecture.md."""
    text = open(os.path.join(ROOT, "docs", "architecture.md")).read()
    return re.search(r"```python\n(.*?)```", text[text.index(section) :], re.S).group(1)


@pytest.fixture
def undo_registrations():
    with registrations_undone():  # the toy is gone after the test
        yield


def load_toy(tmp_path, monkeypatch):
    (tmp_path / "toy_allocator.py").write_text(documented_example("## Writing an allocator"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toy_allocator", raising=False)
    importlib.import_module("toy_allocator")  # what VERL_USE_EXTERNAL_MODULES=toy_allocator does in each process
    assert TOY in ALLOCATORS and TOY in KEY_GROUPS


def generated_groups(trainer):
    """Per generation call: each prompt's rollouts (correct or not), without the padding rows at the end."""
    calls = []
    for call in trainer.async_rollout_manager.calls:
        ids = np.asarray(call.prompt_ids)
        rows = len(np.unique(ids)) * N  # padding repeats the first rows, so it adds no prompt
        correct = np.asarray(call.correct[:rows]).reshape(-1, N)
        calls.append(dict(zip(ids[:rows:N].tolist(), correct, strict=True)))
    return calls


@pytest.mark.usefixtures("undo_registrations")
def test_the_documented_allocator_trains_leaves_agreed_prompts_out_and_resumes(tmp_path, tokenizer, monkeypatch):
    load_toy(tmp_path, monkeypatch)
    probs = [0.5] * 32 + [0.0] * 4 + [1.0] * 4
    extra = [*USE_TOY, "trainer.total_training_steps=12", "trainer.save_freq=6"]
    full = fit_run(tmp_path / "full", tokenizer, extra, probs=probs)
    assert len(full.steps) == 12 and all(s[names.PROMPTS_IN_BATCH] == B for s in full.steps)
    agreed = set()
    for groups in generated_groups(full.trainer):
        assert not agreed & set(groups), "a prompt whose last group all agreed was generated again"
        for pid, correct in groups.items():
            (agreed.add if len(set(correct.tolist())) == 1 else agreed.discard)(pid)
    assert set(range(32, 40)) <= agreed  # the 0 and 1 prompts, after their first group
    for call in (c for c in full.trainer.actor_rollout_wg.calls if c.kind == "update_actor"):
        for uid in set(call.uids):  # every trained group disagrees
            assert len({a for u, a in zip(call.uids, call.acc, strict=True) if u == uid}) == 2
    checkpoint = tmp_path / "full" / "ckpt" / "global_step_6"
    resumed = resume_run(tmp_path / "resumed", tokenizer, extra, checkpoint, probs=probs)
    assert_resumed_like(resumed, full, 6)
    assert resumed.trainer.allocator.agreed == full.trainer.allocator.agreed


@pytest.mark.usefixtures("undo_registrations")
def test_the_documented_allocators_knob_is_a_config_key_with_its_default(tmp_path, tokenizer, monkeypatch):
    load_toy(tmp_path, monkeypatch)
    knob = "algorithm.skip_agreed.patience"
    assert compose_pc_config([]).algorithm.skip_agreed.patience == 1  # composed, so no + is needed
    settings = PCSettings.from_config(compose_pc_config([*USE_TOY, f"{knob}=2"]))
    assert settings.group(KEY_GROUPS[TOY]).patience == 2 and knob in PCSettings.keys()
    with pytest.raises(PCConfigError, match=f"{knob}=0 must be at least 1"):
        PCSettings.from_config(compose_pc_config([f"{knob}=0"]))
    assert unknown_key_problems([f"{knob[:-1]}x=2"]) == [f"{knob[:-1]}x is not a config key: did you mean {knob}?"]
    # With patience 2 a prompt is generated once more after its first agreeing group, then left out.
    probs = [0.5] * 32 + [0.0] * 4 + [1.0] * 4
    run = fit_run(tmp_path / "p2", tokenizer, [*USE_TOY, f"{knob}=2", "trainer.total_training_steps=8"], probs=probs)
    streak = {}
    for groups in generated_groups(run.trainer):
        assert all(streak.get(pid, 0) < 2 for pid in groups), "a prompt left out was generated again"
        for pid, correct in groups.items():
            streak[pid] = streak.get(pid, 0) + 1 if len(set(correct.tolist())) == 1 else 0
    assert any(streak.get(pid, 0) == 2 for pid in range(32, 40))  # an agreeing prompt came back once


@pytest.mark.usefixtures("undo_registrations")
def test_when_every_prompt_is_left_out_nothing_is_generated_and_the_run_stops(tmp_path, tokenizer, monkeypatch, caplog):
    """Data of only 0/1 pass rates: every group of the first epoch agrees, so the second leaves every prompt out."""
    load_toy(tmp_path, monkeypatch)
    log = env_file_logger(tmp_path)
    trainer = build_trainer(tmp_path, tokenizer, probs=[0.0] * 20 + [1.0] * 20, extra=USE_TOY)
    with caplog.at_level("WARNING", logger="recipe.pc"):
        trainer.fit()
    rounds_an_epoch = 40 // G
    assert len(trainer.async_rollout_manager.calls) == rounds_an_epoch  # the first epoch's, none after
    assert trainer.counters.gen_round == 2 * rounds_an_epoch and trainer.counters.epoch == 2
    assert step_records(log) == [] and not trainer.actor_rollout_wg.calls
    assert "epoch 1: the allocator left out every prompt of its 5 rounds" in caplog.text


@pytest.mark.usefixtures("undo_registrations")
def test_the_documented_allocator_is_simulated_and_planned_through_the_public_tools(tmp_path, monkeypatch, capsys):
    load_toy(tmp_path, monkeypatch)
    overrides = (*USE_TOY, "data.train_batch_size=8", "data.gen_batch_size=16", "actor_rollout_ref.rollout.n=4")
    simulated = simulate(np.r_[np.full(50, 0.5), np.zeros(50)], Registered(overrides, "toy"), steps=20, warmup=10)
    assert (simulated.label, simulated.group_size, simulated.trained_groups_per_step) == ("toy", 4, 8)
    # The unsolvable half is left out after its first group: a round of 16 prompts generates about 8 groups.
    assert simulated.commit_rollouts_per_step < simulated.rounds_per_step * 16 * 4 * 0.6
    sizes = ["--train-batch-size", "4", "--gen-batch-size", "8", "--group-size", "4"]
    toy = ["--allocator", TOY, "--set", "algorithm.max_num_gen_batches=20", "--simulate", "5"]
    assert plan.main(["predict", os.path.join(FIXTURES, "plan"), *sizes, *toy]) == 0
    simulated_table = capsys.readouterr().out.split("simulated (")[1]
    assert f"| {TOY} n=4 G=8 algorithm.max_num_gen_batches=20 | 4 |" in simulated_table


@pytest.mark.usefixtures("undo_registrations")
def test_the_documented_prompt_filter_plugs_in_by_one_file_and_one_key(tmp_path, tokenizer, monkeypatch):
    (tmp_path / "toy_filter.py").write_text(documented_example("## Writing a prompt filter"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toy_filter", raising=False)
    importlib.import_module("toy_filter")
    trainer = fit_run(
        tmp_path, tokenizer, ["algorithm.prompt_filter=even_ids", "trainer.total_training_steps=3"]
    ).trainer
    assert type(trainer.prompt_filter).__name__ == "EvenIds"
    generated = [np.asarray(c.prompt_ids) for c in trainer.async_rollout_manager.calls]
    assert len(generated) >= 3 and all((ids % 2 == 0).all() for ids in generated)
