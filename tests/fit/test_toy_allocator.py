"""A new allocator is one module and its registration: one written here, in a temporary module, trains through the
real fit() on the stand-ins and is simulated by the cost model, with no change to the trainer, settings or simulator."""

import importlib
import sys
import textwrap

import numpy as np
from support import B, build_trainer, compose_pc_config, env_file_logger, step_records

from recipe.pc import allocators
from recipe.pc import metric_names as names
from recipe.pc.allocators import ALLOCATORS
from recipe.pc.settings import PCSettings
from recipe.pc_tools.simulate import SimulatedRun

TOY = textwrap.dedent(
    '''
    """Trains the prompts of a round whose id is even; groups of rollout.n, generated for every new prompt."""
    import numpy as np

    from recipe.pc.allocation import classify_by_spread, group_rows
    from recipe.pc.allocators.base import GROUP, Allocator, Request, RoundPlan, RoundResult, Verdict, register
    from recipe.pc.compact import Segment


    @register
    class EvenPrompts(Allocator):
        name = "even_prompts"

        def plan(self, prompts, view):
            return RoundPlan((Request("all", prompts, self.pc.n_commit, GROUP),))

        def absorb(self, plan, generated, view):
            rows = generated["all"]
            values = np.asarray(rows.non_tensor_batch[self.pc.agg_metric], dtype=float)
            verdict = classify_by_spread(rows.non_tensor_batch["index"], values)
            ids = verdict.stats.prompt_ids
            fresh = (ids % 2 == 0) & ~np.isin(ids, list(view.committed_ids))
            kept = np.flatnonzero(fresh)[: view.needed]
            rows_kept = rows.select_idxs(group_rows(verdict.stats.first_row[kept], self.pc.n_commit))
            return RoundResult([Segment(rows_kept)], ids[kept], [Verdict(verdict, values)])
    '''
)


def load_toy(tmp_path, monkeypatch):
    (tmp_path / "toy_allocator.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = dict(ALLOCATORS)  # the test's own registry, so the toy is gone after it
    monkeypatch.setattr(allocators, "ALLOCATORS", registry)
    monkeypatch.setattr(allocators.base, "ALLOCATORS", registry)
    monkeypatch.delitem(sys.modules, "toy_allocator", raising=False)
    importlib.import_module("toy_allocator")  # what VERL_USE_EXTERNAL_MODULES=toy_allocator does in each process
    assert "even_prompts" in registry and "even_prompts" not in ALLOCATORS


def test_a_toy_allocator_trains_through_fit(tmp_path, tokenizer, monkeypatch):
    load_toy(tmp_path, monkeypatch)
    log = env_file_logger(tmp_path)
    trainer = build_trainer(
        tmp_path, tokenizer, extra=["algorithm.rollout_allocation=even_prompts", "trainer.total_training_steps=4"]
    )
    trainer.fit()
    updates = [c for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"]
    assert len(updates) == len(step_records(log)) == 4
    for call in updates:
        ids = np.asarray(call.prompt_ids)
        assert len(np.unique(ids)) == B and (ids % 2 == 0).all()
    steps = step_records(log)
    assert all(s[names.PROMPTS_IN_BATCH] == B for s in steps)
    assert sum(s[names.ROUNDS] for s in steps) > 4  # half of each round trains: some steps take two


def test_a_toy_allocator_is_simulated_by_the_cost_model(tmp_path, monkeypatch):
    load_toy(tmp_path, monkeypatch)
    settings = PCSettings.from_config(
        compose_pc_config(
            [
                "algorithm.rollout_allocation=even_prompts",
                "data.train_batch_size=8",
                "data.gen_batch_size=8",
                "actor_rollout_ref.rollout.n=4",
            ]
        )
    )
    rng = np.random.default_rng(0)
    run = SimulatedRun(settings, np.full(100, 0.5), rng, np.random.default_rng(1))
    totals = np.array([run.step(step) for step in range(1, 21)])
    rounds, _, commits, trained = totals[:, :4].T
    assert (trained == 8).all()  # every step fills with 8 even prompts
    # Rounds of 8 prompts with about 4 even ones: two rounds a step, more when a round has fewer.
    assert 2 <= rounds.mean() <= 3 and (commits == rounds * 8 * 4).all()
