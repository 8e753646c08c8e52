"""``algorithm.rollout_allocation=knapsack`` driven round by round in process (no trainer): which prompts it commits
and with how many rollouts, what happens to those it passes over, its groups, its metrics, its state, its settings."""

import copy
import functools

import numpy as np
import pytest
import yaml
from omegaconf import OmegaConf

from recipe.pc import metric_names as names
from recipe.pc.allocators import make_allocator
from recipe.pc.allocators.base import COMMIT, PILOT
from recipe.pc.settings import PCConfigError, PCSettings
from recipe.pc.step import StepState, round_uids
from recipe.pc.testing import compose_pc_config, pilot_of, play_round, prompt_rows, rollout_rows

N_PILOT, N_COMMIT = 4, 8
KNAPSACK = [
    "algorithm.rollout_allocation=knapsack",
    f"algorithm.exploration.n={N_PILOT}",
    f"actor_rollout_ref.rollout.n={N_COMMIT}",
    "algorithm.knapsack.unit=2",
    "algorithm.knapsack.min_commit=2",
    "algorithm.knapsack.max_commit=16",
]


@functools.cache
def composed(batch: int, preset: str | None):
    overrides = [*KNAPSACK, f"data.train_batch_size={batch}", f"algorithm.min_train_prompts={batch}"]
    return compose_pc_config(overrides + ([f"preset={preset}"] if preset else []))


def knapsack(batch=2, seed=0, *overrides):
    """The allocator on a config composed once per batch size and preset, then edited (composing takes a while)."""
    preset = next((o.split("=")[1] for o in overrides if o.startswith("preset=")), None)
    config = copy.deepcopy(composed(batch, preset))
    for override in overrides:
        name, value = override.split("=", 1)
        if name != "preset":
            OmegaConf.update(config, name, yaml.safe_load(value))
    return make_allocator(PCSettings.from_config(config), np.random.default_rng(seed))


def a_round(alloc, state, correct_counts, first_id, commit_outcome, gen_round, step=1, pilot_values=None):
    """Pilot prompts ``first_id, first_id + 1, ...`` (``correct_counts`` of 4 each, the successes first, or
    ``pilot_values``); a committed prompt's rollouts are ``commit_outcome(prompt_id, size)``. Returns the requests
    and the round's result."""
    ids, values = pilot_of(correct_counts, N_PILOT)
    ids += first_id - 100
    if pilot_values is not None:
        values = np.concatenate(pilot_values)
    prompts = prompt_rows(ids[::N_PILOT], uids=round_uids(gen_round, ids[::N_PILOT]))

    def outcomes(requests):
        assert requests[0].kind == PILOT and all(r.kind == COMMIT for r in requests[1:])
        generated = {}
        for r in requests:  # each row carries its prompt row's uid, as the trainer's generation does
            if r.kind == PILOT:
                rows = rollout_rows(ids, values)
            else:
                commit_ids = r.prompts.non_tensor_batch["index"]
                outcome = np.concatenate([commit_outcome(i, r.n) for i in commit_ids])
                rows = rollout_rows(np.repeat(commit_ids, r.n), outcome)
            rows.non_tensor_batch["uid"] = np.repeat(r.prompts.non_tensor_batch["uid"], r.n)
            generated[r.name] = rows
        return generated

    return play_round(alloc, state, prompts, outcomes, step)


def commits_of(requests) -> dict[int, int]:
    return {int(i): r.n for r in requests if r.kind == COMMIT for i in r.prompts.non_tensor_batch["index"]}


def one_success(prompt_id, size):
    return [1.0] + [0.0] * (size - 1)


def test_an_all_wrong_pilot_takes_a_large_commit_from_band_prompts_whose_size_does_not_matter():
    """Two 3-of-4 band prompts and an all-wrong and an all-right edge; two prompts to commit with 2 x 8 rollouts.
    A 3-of-4 prompt is worth 1/14 at any size, the all-wrong one 5/56 - 5/((c+7)(c+8)) at c: 2 + 14 beats 8 + 8."""
    alloc, state = knapsack(), StepState()
    a_round(alloc, state, [3, 3, 0, 4], 100, one_success, gen_round=1)
    assert {e.prompt_id for e in alloc.buffer.entries()} == {100, 101}
    assert [e.prompt_id for e in alloc.edges] == [102, 103]

    requests, result = a_round(alloc, state, [2, 0], 200, one_success, gen_round=2)
    commits = commits_of(requests)
    band = [i for i in commits if i in (100, 101)]
    assert len(band) == 1 and commits == {band[0]: 2, 102: 14}
    assert sum(commits.values()) == 2 * N_COMMIT  # what Pilot-Commit spends on two prompts
    # The band prompt passed over stays buffered; the all-right edge was offered once and is dropped (skipped).
    assert {e.prompt_id for e in alloc.buffer.entries()} == ({100, 101} - {band[0]}) | {200}
    assert [e.prompt_id for e in alloc.edges] == [201] and 103 not in alloc.buffer

    # The all-wrong prompt whose commit got a success trains as one group: its 4 pilot rows and 14 commit rows.
    uid = np.concatenate([s.column("uid") for s in result.segments])
    acc = np.concatenate([np.asarray(s.column("acc"), dtype=float) for s in result.segments])
    index = np.concatenate([s.column("index") for s in result.segments])
    edge_group = uid == "1:102"
    assert (index[edge_group] == 102).all() and edge_group.sum() == N_PILOT + 14
    assert sorted(acc[edge_group].tolist()) == [0.0] * 17 + [1.0]
    assert len(np.unique(uid)) == 2 and len(uid) == 2 * (N_PILOT + N_COMMIT)  # the rows Pilot-Commit's step trains

    metrics = alloc.end_step(1)
    assert metrics[f"{names.KNAPSACK_COMMIT_SIZE}/count"] == 2
    assert (metrics[f"{names.KNAPSACK_COMMIT_SIZE}/min"], metrics[f"{names.KNAPSACK_COMMIT_SIZE}/max"]) == (2, 14)
    assert metrics[names.KNAPSACK_UNIFORM_VALUE] == pytest.approx(2 / 14)
    assert metrics[names.KNAPSACK_VALUE] == pytest.approx(1 / 14 + 5 / 56 - 5 / (21 * 22))
    assert (metrics[names.KNAPSACK_EDGE_CANDIDATES], metrics[names.KNAPSACK_EDGE_COMMITTED]) == (2, 1)
    assert metrics[names.KNAPSACK_EDGE_SHARE] == 0.5
    assert alloc.end_step(2)[f"{names.KNAPSACK_COMMIT_SIZE}/count"] == 0  # the tally starts afresh each step


def test_equal_pilots_get_equal_commits():
    alloc, state = knapsack(batch=3), StepState()
    a_round(alloc, state, [2] * 5, 100, one_success, gen_round=1)
    requests, _ = a_round(alloc, state, [4], 200, one_success, gen_round=2)
    assert sorted(commits_of(requests).values()) == [N_COMMIT] * 3


def test_nothing_buffered_commits_nothing_and_the_edges_are_dropped():
    """As Pilot-Commit: a round commits what the buffer holds; the edges alone are not committed."""
    alloc, state = knapsack(), StepState()
    a_round(alloc, state, [0, 0, 4], 100, one_success, gen_round=1)
    assert len(alloc.buffer) == 0 and len(alloc.edges) == 3 and alloc.pending() == 3
    requests, result = a_round(alloc, state, [4], 200, one_success, gen_round=2)
    assert commits_of(requests) == {} and result.segments == []
    assert [e.prompt_id for e in alloc.edges] == [200]  # only this round's edge waits
    assert alloc.end_step(1)[names.KNAPSACK_EDGE_CANDIDATES] == 0  # offered to no knapsack


def test_a_prompt_is_committed_at_most_once_a_step():
    alloc, state = knapsack(batch=3), StepState()
    a_round(alloc, state, [3, 3, 0, 4], 100, one_success, gen_round=1)
    requests, _ = a_round(alloc, state, [0, 3], 102, one_success, gen_round=2)  # 102 committed and piloted again
    assert 102 in commits_of(requests) and 102 not in {e.prompt_id for e in alloc.edges}
    requests, _ = a_round(alloc, state, [4], 300, one_success, gen_round=3)
    assert len(commits_of(requests)) == 1 and 102 not in commits_of(requests)
    assert len(state.committed_ids) == 3
    # Were a committed prompt ever offered again, the knapsack would refuse rather than commit it twice.
    entry = alloc.buffer.take([e.prompt_id for e in alloc.buffer.entries()])[0]
    alloc.buffer.add(102, entry.payload, entry.metric_values, 1)
    with pytest.raises(RuntimeError, match="already committed"):
        alloc.plan(prompt_rows([]), StepState(committed_ids={102}).view(1, 3))


def test_the_buffer_and_the_edges_resume_as_saved():
    import io

    import torch

    alloc, state = knapsack(seed=3), StepState()
    a_round(alloc, state, [3, 1, 0, 4, 2], 100, one_success, gen_round=1)
    saved = io.BytesIO()
    torch.save(alloc.state_dict(), saved)
    saved.seek(0)
    resumed = knapsack(seed=3)
    resumed.load_state_dict(torch.load(saved, weights_only=True))  # plain data: loads without running code
    assert [e.prompt_id for e in resumed.edges] == [102, 103]
    assert alloc.summary() == resumed.summary() == "buffer_size=3 evict_next_epoch=1 screened=0 edges=2"
    a, _ = a_round(alloc, StepState(), [2], 200, one_success, gen_round=2)
    b, _ = a_round(resumed, StepState(), [2], 200, one_success, gen_round=2)
    assert commits_of(a) == commits_of(b) and len(commits_of(a)) == 2


def test_dropping_what_waits_drops_the_edges_too():
    alloc, state = knapsack(), StepState()
    a_round(alloc, state, [3, 0, 0, 4], 100, one_success, gen_round=1)
    assert alloc.drop_pending() == 4 and alloc.pending() == 0


def test_a_pilot_metric_that_is_not_a_pass_is_refused_naming_the_key():
    alloc, state = knapsack(), StepState()
    prompts = prompt_rows([100, 101], uids=["1:100", "1:101"])
    rows = rollout_rows(np.repeat([100, 101], N_PILOT), [0.5, 0.0, 1.0, 0.0] * 2)
    rows.non_tensor_batch["uid"] = np.repeat(["1:100", "1:101"], N_PILOT).astype(object)
    play_round(alloc, state, prompts, lambda r: {r[0].name: rows})
    with pytest.raises(ValueError, match="algorithm.agg_metric='acc' gave prompt 10[01] the pilot values"):
        alloc.plan(prompt_rows([]), state.view(1, 2))


# ------------------------------------------------------------------ settings
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["algorithm.knapsack.unit=0"], "algorithm.knapsack.unit=0 must be at least 1"),
        (["algorithm.knapsack.min_commit=18"], "must satisfy unit <= min_commit <= max_commit"),
        (["algorithm.knapsack.max_commit=15"], "algorithm.knapsack.max_commit=15 must be a multiple of"),
        (["algorithm.knapsack.min_commit=3"], "algorithm.knapsack.min_commit=3 must be a multiple of"),
        (["algorithm.knapsack.prior_alpha=0"], "algorithm.knapsack.prior_alpha=0.0 must be positive"),
        (["actor_rollout_ref.rollout.n=7"], "rollout.n=7 must be a multiple of algorithm.knapsack.unit=2: set"),
        (["algorithm.knapsack.min_commit=10"], r"rollout.n=8 must lie in \[algorithm.knapsack.min_commit=10"),
        (["algorithm.knapsack.min_commit=8", "algorithm.knapsack.max_commit=8"], "min_commit = max_commit = 8 leaves"),
        (["algorithm.downsample.n=16"], "algorithm.downsample.n=16 down-samples commits of one size"),
        (["algorithm.exploration.screen_n=2"], "algorithm.exploration.screen_n=2 screens pilots"),
        (["algorithm.buffer_sampling_method=max_variance"], "algorithm.buffer_sampling_method='max_variance' ranks"),
        (["preset=reference"], "preset=reference runs the authors' Pilot-Commit"),
        (["algorithm.min_train_prompts=1"], "knapsack trains full steps only"),
    ],
)
def test_settings_the_knapsack_cannot_run_are_refused_naming_the_key(overrides, message):
    with pytest.raises(PCConfigError, match=message.replace("(", r"\(").replace("+", r"\+")):
        knapsack(2, 0, *overrides)


def test_an_unfilled_step_may_raise_instead_of_training():
    alloc = knapsack(2, 0, "algorithm.min_train_prompts=null", "algorithm.raise_on_unfilled_batch=true")
    assert alloc.group_size_range(alloc.pc) == (N_PILOT + 2, N_PILOT + 16)


def test_ties_between_equal_prompts_are_drawn_at_random():
    chosen = set()
    for seed in range(4):
        alloc, state = knapsack(2, seed), StepState()
        a_round(alloc, state, [2] * 8, 100, one_success, gen_round=1)
        requests, _ = a_round(alloc, state, [4], 200, one_success, gen_round=2)
        chosen.add(frozenset(commits_of(requests)))
    assert len(chosen) > 1


@pytest.mark.parametrize(
    ("pilot", "posterior", "no_gradient"),
    [([0.0, 0.0, 1.0, 0.0], (2, 4), (1, 2 + N_COMMIT)), ([1.0, 1.0, 0.0, 1.0], (4, 2), (1 + N_COMMIT, 2))],
)
def test_the_group_disagrees_by_its_reused_rows_and_the_posterior_counts_every_pilot_row(pilot, posterior, no_gradient):
    """The pilot disagrees, but the two rows reused (first_n) agree: the value of a commit of 8 is E[p(1-p)^2] less
    the chance that all 8 commit rows agree with them, E[p(1-p)^10] (all failed) or E[p^9(1-p)^2] (all succeeded),
    under the posterior of all 4 pilot rows; not the flat E[p(1-p)^2]."""
    from recipe.pc.knapsack import beta_moment

    alloc, state = (
        knapsack(1, 0, "algorithm.exploration.n_effective=2", "algorithm.buffer_response_sampling_method=first_n"),
        StepState(),
    )
    a_round(alloc, state, [int(sum(pilot))], 100, one_success, gen_round=1, pilot_values=[pilot])
    requests, result = a_round(alloc, state, [4], 200, one_success, gen_round=2)
    assert commits_of(requests) == {100: N_COMMIT}
    assert sum(len(s) for s in result.segments) == 2 + N_COMMIT
    value = alloc.end_step(1)[names.KNAPSACK_VALUE]
    expected = beta_moment(*posterior, 1, 2) - beta_moment(*posterior, *no_gradient)
    assert value == pytest.approx(expected, rel=1e-12)


def test_a_buffered_prompt_piloted_again_at_an_edge_keeps_its_buffered_entry_and_is_not_also_an_edge():
    """One to commit from a 3-of-4 and a 1-of-4 band prompt: the 1-of-4 one is worth more, so the 3-of-4 one stays
    buffered. The same round pilots it again (a new epoch's dataloader) and all 4 fail: it stays offered once."""
    alloc, state = knapsack(1), StepState()
    a_round(alloc, state, [3, 1], 100, one_success, gen_round=1)
    requests, _ = a_round(alloc, state, [0], 100, one_success, gen_round=2)
    assert commits_of(requests) == {101: N_COMMIT}
    assert alloc.edges == []
    assert [(e.prompt_id, e.metric_values.tolist()) for e in alloc.buffer.entries()] == [(100, [1.0, 1.0, 1.0, 0.0])]


def test_an_edge_prompt_evicted_at_the_epoch_end_is_not_offered_next_epoch():
    class Dataset:
        def evict(self, ids):
            self.evicted = set(ids)
            return len(ids)

    alloc, state, data = knapsack(), StepState(), Dataset()
    a_round(alloc, state, [3, 0, 0, 4], 100, one_success, gen_round=1)
    assert [e.prompt_id for e in alloc.edges] == [101, 102, 103]
    alloc.evict_next_epoch.add(103)  # the all-right pilot, marked solved
    assert alloc.end_epoch(data) == 1 and data.evicted == {103}
    assert [e.prompt_id for e in alloc.edges] == [101, 102]
