"""A new allocator is one module and its registration, tested with the kit an author uses (``recipe.pc.testing``): the
examples of docs/architecture.md, run as written, train through the real fit() on the stand-ins, resume like an
uninterrupted run, stop cleanly when every prompt is left out, and are simulated and planned through the public tools,
with no change to the trainer, the settings or the simulator and no patching of the registries."""

import os
import re

import numpy as np
import pytest
from support import FIXTURES, ROOT

from recipe.pc import metric_names as names
from recipe.pc.main_pc import unknown_key_problems
from recipe.pc.registry import ALLOCATORS, KEY_GROUPS
from recipe.pc.settings import PCConfigError, PCSettings
from recipe.pc.step import StepState
from recipe.pc.testing import (
    N_COMMIT,
    B,
    G,
    allocator,
    check_resume,
    compose_pc_config,
    pilot_of,
    play_round,
    price,
    prompt_rows,
    registered,
    rollout_rows,
    train,
)
from recipe.pc_tools import plan

TOY = "skip_agreed"
# Prompts that disagree half the time, and prompts whose groups always agree (never or always solved).
AGREEING = [0.5] * 32 + [0.0] * 4 + [1.0] * 4


def documented_example(section: str) -> str:
    """The python block of a section of docs/architecture.md."""
    text = open(os.path.join(ROOT, "docs", "architecture.md")).read()
    return re.search(r"```python\n(.*?)```", text[text.index(section) :], re.S).group(1)


@pytest.fixture
def toy(tmp_path):
    """The documented allocator's module, written as an author would and registered for this test only."""
    path = tmp_path / "my_allocator.py"
    path.write_text(documented_example("## Writing an allocator"))
    with registered(path) as module:
        yield module
    assert TOY not in ALLOCATORS and TOY not in KEY_GROUPS  # no later test sees it


def generated_groups(run):
    """Per generation call: each prompt's rollouts (correct or not), without the padding rows at the end."""
    calls = []
    for call in run.trainer.async_rollout_manager.calls:
        ids = np.asarray(call.prompt_ids)
        rows = len(np.unique(ids)) * N_COMMIT  # padding repeats the first rows, so it adds no prompt
        correct = np.asarray(call.correct[:rows]).reshape(-1, N_COMMIT)
        calls.append(dict(zip(ids[:rows:N_COMMIT].tolist(), correct, strict=True)))
    return calls


def test_the_documented_test_of_the_documented_allocator_passes(tmp_path, monkeypatch):
    (tmp_path / "my_allocator.py").write_text(documented_example("## Writing an allocator"))
    monkeypatch.syspath_prepend(str(tmp_path))
    namespace = {}
    exec(compile(documented_example("## Testing your allocator"), "test_my_allocator.py", "exec"), namespace)
    namespace["test_skip_agreed"](tmp_path / "kit")
    assert TOY not in ALLOCATORS


def test_the_documented_allocator_leaves_agreed_prompts_out_and_resumes_like_an_uninterrupted_run(tmp_path, toy):
    full, _ = check_resume(tmp_path, TOY, steps=12, cut=6, pass_rates=AGREEING)
    assert len(full.steps) == 12 and all(s[names.PROMPTS_IN_BATCH] == B for s in full.steps)
    agreed = set()
    for groups in generated_groups(full):
        assert not agreed & set(groups), "a prompt whose last group all agreed was generated again"
        for pid, correct in groups.items():
            (agreed.add if len(set(correct.tolist())) == 1 else agreed.discard)(pid)
    assert set(range(32, 40)) <= agreed  # the 0 and 1 prompts, after their first group
    for call in (c for c in full.trainer.actor_rollout_wg.calls if c.kind == "update_actor"):
        for uid in set(call.uids):  # every trained group disagrees
            assert len({a for u, a in zip(call.uids, call.acc, strict=True) if u == uid}) == 2


def test_the_kit_drives_the_documented_allocator_round_by_round(toy):
    """One round and the next without a trainer (``play_round``): the groups that disagree train, and a prompt whose
    group agreed is not asked for again."""
    alloc, state = allocator(TOY, ["data.train_batch_size=4", "actor_rollout_ref.rollout.n=4"]), StepState()
    ids, values = pilot_of([2, 4, 0, 1], 4)  # prompts 100-103: 100 and 103 disagree, 101 and 102 agree

    def outcomes(requests):
        (request,) = requests
        asked = request.prompts.non_tensor_batch["index"]
        keep = np.isin(ids, asked)
        return {request.name: rollout_rows(ids[keep], values[keep])}

    requests, result = play_round(alloc, state, prompt_rows(ids[::4]), outcomes)
    assert [(r.name, r.n, len(r.prompts)) for r in requests] == [("groups", 4, 4)]
    assert result.segments[0].rows.non_tensor_batch["index"].tolist() == [100] * 4 + [103] * 4
    assert state.view(1, 4).needed == 2  # two of the step's four prompts are in
    requests, _ = play_round(alloc, state, prompt_rows(ids[::4]), outcomes)
    assert requests[0].prompts.non_tensor_batch["index"].tolist() == [100, 103]


def test_the_documented_allocators_knob_is_a_config_key_with_its_default(tmp_path, toy):
    knob = "algorithm.skip_agreed.patience"
    assert compose_pc_config([]).algorithm.skip_agreed.patience == 1  # composed, so no + is needed
    settings = PCSettings.from_config(compose_pc_config([f"algorithm.rollout_allocation={TOY}", f"{knob}=2"]))
    assert settings.group(toy.SkipAgreedKeys).patience == 2 and knob in PCSettings.keys()
    with pytest.raises(PCConfigError, match=f"{knob}=0 must be at least 1"):
        PCSettings.from_config(compose_pc_config([f"{knob}=0"]))
    assert unknown_key_problems([f"{knob[:-1]}x=2"]) == [f"{knob[:-1]}x is not a config key: did you mean {knob}?"]
    # With patience 2 a prompt is generated once more after its first agreeing group, then left out.
    run = train(tmp_path, TOY, 8, overrides=[f"{knob}=2"], pass_rates=AGREEING)
    streak = {}
    for groups in generated_groups(run):
        assert all(streak.get(pid, 0) < 2 for pid in groups), "a prompt left out was generated again"
        for pid, correct in groups.items():
            streak[pid] = streak.get(pid, 0) + 1 if len(set(correct.tolist())) == 1 else 0
    assert any(streak.get(pid, 0) == 2 for pid in range(32, 40))  # an agreeing prompt came back once


def test_when_every_prompt_is_left_out_nothing_is_generated_and_the_run_stops(tmp_path, toy, caplog):
    """Data of only 0/1 pass rates: every group of the first epoch agrees, so the second leaves every prompt out."""
    with caplog.at_level("WARNING", logger="recipe.pc"):
        run = train(tmp_path, TOY, 9, pass_rates=[0.0] * 20 + [1.0] * 20)
    rounds_an_epoch = 40 // G
    assert len(run.trainer.async_rollout_manager.calls) == rounds_an_epoch  # the first epoch's, none after
    assert run.trainer.counters.gen_round == 2 * rounds_an_epoch and run.trainer.counters.epoch == 2
    assert run.steps == [] and run.rows_trained == []
    assert "epoch 1: the allocator left out every prompt of its 5 rounds" in caplog.text


def test_the_documented_allocator_is_simulated_and_planned_through_the_public_tools(toy, capsys):
    overrides = ("data.train_batch_size=8", "data.gen_batch_size=16", "actor_rollout_ref.rollout.n=4")
    simulated = price(TOY, np.r_[np.full(50, 0.5), np.zeros(50)], overrides, steps=20, warmup=10)
    assert (simulated.label, simulated.group_size, simulated.trained_groups_per_step) == (TOY, 4, 8)
    # The unsolvable half is left out after its first group: a round of 16 prompts generates about 8 groups.
    assert simulated.commit_rollouts_per_step < simulated.rounds_per_step * 16 * 4 * 0.6
    sizes = ["--train-batch-size", "4", "--gen-batch-size", "8", "--group-size", "4"]
    allocator = ["--allocator", TOY, "--set", "algorithm.max_num_gen_batches=20", "--simulate", "5"]
    assert plan.main(["predict", os.path.join(FIXTURES, "plan"), *sizes, *allocator]) == 0
    simulated_table = capsys.readouterr().out.split("simulated (")[1]
    assert f"| {TOY} n=4 G=8 algorithm.max_num_gen_batches=20 | 4 |" in simulated_table


def test_the_documented_prompt_filter_plugs_in_by_one_file_and_one_key(tmp_path):
    path = tmp_path / "my_filter.py"
    path.write_text(documented_example("## Writing a prompt filter"))
    with registered(path):
        run = train(tmp_path / "run", "pilot_commit", 3, prompt_filter="even_ids")
    assert type(run.trainer.prompt_filter).__name__ == "EvenIds"
    generated = [np.asarray(c.prompt_ids) for c in run.trainer.async_rollout_manager.calls]
    assert len(generated) >= 3 and all((ids % 2 == 0).all() for ids in generated)
