"""The test kit an author uses (``recipe.pc.testing``): a module registers for one block only; what would leak or
register nothing is refused; the resume check fails, naming the metric or the state, where a resumed run differs from
the uninterrupted one; and pricing reads a rollout dump as ``plan`` does."""

import copy
import json
import os
import sys
from collections import defaultdict

import numpy as np
import pytest
import torch
from support import FIXTURES

from recipe.pc.registry import ALLOCATORS
from recipe.pc.testing import B, check_resume, first_difference, price, registered, train

# GRPO that counts its rounds and saves the count, but has no load_state_dict: a resumed run starts again from 0.
FORGETFUL = """
from recipe.pc.allocators.base import register
from recipe.pc.allocators.grpo import GRPOAllocator


@register
class Forgetful(GRPOAllocator):
    name = "forgetful"

    def __init__(self, pc, rng):
        super().__init__(pc, rng)
        self.rounds = 0

    def absorb(self, plan, generated, view):
        self.rounds += 1
        return super().absorb(plan, generated, view)

    def end_step(self, step):
        return LOGGED

    def state_dict(self):
        return {"rounds": self.rounds}
"""


def forgetful(tmp_path, logged="{}"):
    path = tmp_path / "forgetful.py"
    path.write_text(FORGETFUL.replace("LOGGED", logged))
    return path


@pytest.mark.parametrize(
    "logged, difference",
    [
        ("{}", "after resuming at step 1, the final state.allocator.state.rounds: got 1, want 2"),
        (
            '{"forgetful/rounds": self.rounds}',
            "after resuming at step 1: step 2 metrics.forgetful/rounds: got 1, want 2",
        ),
    ],
    ids=["state", "metric"],
)
def test_the_resume_check_names_what_a_resumed_run_forgot(tmp_path, logged, difference):
    with registered(forgetful(tmp_path, logged)), pytest.raises(AssertionError) as failed:
        check_resume(tmp_path, "forgetful", steps=2, cut=1, overrides=[f"data.gen_batch_size={B}"])  # GRPO's round
    assert str(failed.value) == difference


def test_a_registered_module_is_gone_after_its_block_and_registers_afresh_in_the_next(tmp_path):
    path = forgetful(tmp_path)
    for _ in range(2):  # the second block imports the module again: no clash with the first's registration
        with registered(path) as module:
            assert ALLOCATORS["forgetful"] is module.Forgetful and sys.modules["forgetful"] is module
        assert "forgetful" not in ALLOCATORS and "forgetful" not in sys.modules


def test_what_would_leak_or_register_nothing_is_refused_before_any_run(tmp_path):
    with pytest.raises(RuntimeError, match="module 'json' is already imported"), registered("json"):
        pass
    (tmp_path / "nothing.py").write_text("VALUE = 1\n")
    with pytest.raises(ValueError, match="'nothing' registered no allocator and no prompt filter"):
        with registered(tmp_path / "nothing.py"):
            pass
    assert "nothing" not in sys.modules
    with pytest.raises(ValueError, match=r"no allocator 'forgetful' is registered .*registered\('your_module'\)"):
        train(tmp_path, "forgetful", 1)
    with pytest.raises(ValueError, match="no prompt filter 'odd_ids' is registered"):
        train(tmp_path, "grpo", 1, prompt_filter="odd_ids")


def test_price_reads_a_rollout_dump_as_plan_does():
    dump = os.path.join(FIXTURES, "plan")
    seen, wins = defaultdict(int), defaultdict(int)
    for name in os.listdir(dump):
        with open(os.path.join(dump, name)) as f:
            for row in map(json.loads, f):
                seen[row["prompt_id"]] += 1
                wins[row["prompt_id"]] += bool(row["acc"])
    rates = np.array([wins[p] / seen[p] for p in sorted(seen)])
    overrides = ["data.train_batch_size=4", "data.gen_batch_size=4", "actor_rollout_ref.rollout.n=4"]
    assert price("grpo", dump, overrides, steps=10, warmup=2) == price("grpo", rates, overrides, steps=10, warmup=2)


def test_first_difference_is_bit_for_bit_and_names_where():
    state = {"counts": [1, 2.0, float("nan")], "rows": torch.tensor([1.0, float("nan")]), "none": None}
    assert first_difference(state, copy.deepcopy(state), "state") is None
    assert first_difference({"a": [1, 2.0]}, {"a": [1, 2.5]}, "s") == "s.a[1]: got 2.0, want 2.5"
    assert first_difference({"a": -0.0}, {"a": 0.0}, "s") == "s.a: got -0.0, want 0.0"
    assert first_difference({"a": 1}, {"a": 1.0}, "s") == "s.a: got 1, want 1.0"
    assert first_difference({"a": 1}, {"b": 1}, "s") == "s: keys ['a', 'b'] are in only one of them"
    tensors = first_difference({"t": torch.tensor([1, 2])}, {"t": torch.tensor([1, 2], dtype=torch.int32)}, "s")
    assert tensors.startswith("s.t: got tensor([1, 2]), want tensor([1, 2], dtype=torch.int32)")


def test_the_resume_check_holds_for_a_correct_allocator_that_validates(tmp_path):
    """Validations (the uninterrupted run's before the cut, the resumed run's before it trains) do not shift the
    comparison of generation calls."""
    check_resume(
        tmp_path, "pilot_commit", steps=3, cut=2, overrides=["trainer.test_freq=1", "trainer.val_before_train=true"]
    )
