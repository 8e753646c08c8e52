"""The allocators driven round by round in process: plan, generate (here: fixed outcomes), absorb.

Each test pins a decision the fit tests cannot see exactly: their 2- and 4-rollout pilots at threshold 1.0
make several wrong allocators pass the same counts, and a wrong commit size or reuse count there is only
stopped by the trainer's own runtime check, not by an assertion.
"""

import copy

import numpy as np
import pytest

from recipe.pc import metric_names as m
from recipe.pc.allocators import make_allocator
from recipe.pc.allocators.base import COMMIT, GROUP, PILOT
from recipe.pc.settings import PCSettings
from recipe.pc.stages.prompt_filter import PromptFilter
from recipe.pc.step import Generation, RunCounters, StepLoop, StepState
from recipe.pc.testing import allocator, compose_pc_config, pilot_of, play_round, prompt_rows, rollout_rows


def step_loop(alloc) -> StepLoop:
    """The trainer's step loop over ``alloc``, without a prompt filter."""
    return StepLoop(alloc.pc, alloc, PromptFilter(), RunCounters())


def pilot_round(alloc, correct_counts, n, step=1, state=None):
    """One round of ``alloc`` piloting one prompt per entry of ``correct_counts`` (prompt ids 100, 101, ...)."""
    state = state or StepState()
    ids, values = pilot_of(correct_counts, n)
    requests, result = play_round(alloc, state, prompt_rows(ids[::n]), lambda r: {r[0].name: rollout_rows(ids, values)})
    assert [(r.kind, r.n, len(r.prompts)) for r in requests] == [(PILOT, n, len(correct_counts))]
    assert result.segments == [] and result.committed_ids.size == 0  # nothing buffered yet: nothing trains
    return state, ids[::n]


# ------------------------------------------------------------------ the band, through the allocator
@pytest.mark.parametrize(
    ("n", "too_incorrect", "passed", "too_correct"),
    # band [0.125, 0.75] (pc_trainer.yaml): with p_lower and p_upper swapped it would be [0.25, 0.875]
    [(8, [0], range(1, 7), [7, 8]), (16, [0, 1], range(2, 13), range(13, 17))],
)
def test_the_pilot_band_counts_every_verdict_exactly(n, too_incorrect, passed, too_correct):
    alloc = allocator(
        "pilot_commit",
        [
            f"algorithm.exploration.n={n}",
            "algorithm.diversity_threshold_lower=0.125",
            "algorithm.diversity_threshold_upper=0.25",
            "algorithm.exclude_threshold_upper=null",
        ],
    )
    tally, _ = pilot_round(alloc, range(n + 1), n)  # prompt 100 + c has c of n correct
    assert (tally.too_incorrect, tally.passed, tally.too_correct) == (len(too_incorrect), len(passed), len(too_correct))
    assert tally.pilot_prompts == n + 1
    assert sorted(e.prompt_id for e in alloc.buffer.entries()) == [100 + c for c in passed]
    assert tally.evict_marked == 0 and alloc.evict_next_epoch == set()


@pytest.mark.parametrize(
    ("take_all_order", "committed"), [("insertion", [100, 101, 102, 103]), ("ranked", [101, 103, 102, 100])]
)
def test_a_round_that_commits_the_whole_buffer_orders_it_by_the_setting(take_all_order, committed):
    alloc = allocator(
        "pilot_commit",
        [
            "algorithm.buffer_sampling_method=max_variance",
            f"algorithm.buffer_take_all_order={take_all_order}",
            "data.train_batch_size=8",
        ],
    )
    state, _ = pilot_round(alloc, [1, 4, 2, 3], 8)  # all four pass; the second spreads most
    plan = alloc.plan(prompt_rows([200]), state.view(1, alloc.pc.train_batch_size))
    (commit,) = [r for r in plan.requests if r.kind == COMMIT]
    assert commit.prompts.non_tensor_batch["index"].tolist() == committed


# ------------------------------------------------------------------ eviction below threshold 1
class EvictingDataset:
    def __init__(self):
        self.evicted: list[set] = []

    def evict(self, ids) -> int:
        self.evicted.append(set(ids))
        return len(ids)


@pytest.mark.parametrize(
    ("n", "threshold", "evicted_counts"),
    # too correct is above 0.75 (7-8 of 8, 13-16 of 16): eviction must follow the threshold, not that verdict
    [(8, 0.5, range(4, 9)), (16, 0.875, range(14, 17)), (16, 0.5, range(8, 17))],
)
def test_eviction_below_one_marks_exactly_the_prompts_at_or_above_the_threshold(n, threshold, evicted_counts):
    alloc = allocator(
        "pilot_commit", [f"algorithm.exploration.n={n}", f"algorithm.exclude_threshold_upper={threshold}"]
    )
    tally, _ = pilot_round(alloc, range(n + 1), n)
    expected = {100 + c for c in evicted_counts}
    assert alloc.evict_next_epoch == expected and tally.evict_marked == len(expected)
    # Prompts marked for eviction that are in the band still wait in the buffer for this epoch's commits.
    assert {e.prompt_id for e in alloc.buffer.entries()} == {100 + c for c in range(n // 8, 3 * n // 4 + 1)}
    dataset = EvictingDataset()
    assert alloc.end_epoch(dataset) == len(expected)
    assert dataset.evicted == [expected] and alloc.evict_next_epoch == set()


# ------------------------------------------------------------------ commit sizing and n_effective
N_PILOT, N_EFFECTIVE, N_COMMIT, B = 4, 2, 3, 4


def commit_round(alloc, tally, new_counts, first_id, buffered_ids, step=1):
    """A round that pilots new prompts (ids from ``first_id``; 2 of 4 correct is in the band) and commits from
    the buffer: the requests, the training segments and the committed prompt ids."""
    ids, values = pilot_of(new_counts, N_PILOT)
    ids += first_id - 100

    def outcomes(requests):
        assert [r.kind for r in requests] == [PILOT, COMMIT]
        commit_ids = requests[1].prompts.non_tensor_batch["index"]
        assert set(commit_ids.tolist()) <= buffered_ids
        commit = rollout_rows(np.repeat(commit_ids, N_COMMIT), np.tile([1.0, 0.0, 0.0], len(commit_ids)))
        return {requests[0].name: rollout_rows(ids, values), requests[1].name: commit}

    requests, result = play_round(alloc, tally, prompt_rows(ids[::N_PILOT]), outcomes, step)
    assert result.committed_ids.tolist() == requests[1].prompts.non_tensor_batch["index"].tolist()
    return requests, result.segments, result.committed_ids


def test_commits_take_what_the_batch_still_needs_and_reuse_n_effective_pilots_each():
    alloc = allocator(
        "pilot_commit",
        [
            f"data.train_batch_size={B}",
            "data.gen_batch_size=5",
            f"algorithm.exploration.n={N_PILOT}",
            f"algorithm.exploration.n_effective={N_EFFECTIVE}",
            f"actor_rollout_ref.rollout.n={N_COMMIT}",
        ],
    )
    tally, first_ids = pilot_round(alloc, [2, 2, 2, 0, 4], N_PILOT)  # three prompts reach the buffer
    buffered = set(first_ids[:3].tolist())
    # Needed 4, buffered 3: all three commit (and this round's pilot buffers three more).
    requests, segments, committed = commit_round(alloc, tally, [2, 2, 2, 4, 0], 200, buffered)
    assert requests[1].n == N_COMMIT and len(committed) == 3 and tally.committed_prompts == 3
    assert_training_groups(segments, committed)
    # Needed 1 (4 - 3 committed this step), buffered 3: one commits, two stay for the next step.
    buffered = {e.prompt_id for e in alloc.buffer.entries()}
    assert len(buffered) == 3
    requests, segments, committed = commit_round(alloc, tally, [0, 0, 0, 0, 0], 300, buffered)
    assert len(committed) == 1 and tally.committed_prompts == B
    assert_training_groups(segments, committed)
    assert len(alloc.buffer) == 2


def assert_training_groups(segments, committed):
    """Each committed prompt trains N_EFFECTIVE of its pilot rollouts (one correct, one wrong: the most balanced
    pair of its 2-of-4 pilot) and then its N_COMMIT commit rollouts, in commit order."""
    *reused, commit = segments
    reused_ids = np.concatenate([np.asarray(s.non_tensor["index"])[s.index] for s in reused])
    reused_acc = np.concatenate([np.asarray(s.non_tensor["acc"])[s.index] for s in reused])
    assert len(reused_ids) == len(committed) * N_EFFECTIVE
    for pid in committed.tolist():
        assert sorted(reused_acc[reused_ids == pid].tolist()) == [0.0, 1.0]
    assert commit.index is None
    assert commit.rows.non_tensor_batch["index"].tolist() == np.repeat(committed, N_COMMIT).tolist()


# ------------------------------------------------------------------ DAPO's group filter on non-binary metrics
def test_dapo_trains_the_groups_whose_scores_vary_whatever_their_mean():
    groups = {
        1: [-1.0] * 4,  # flat at -1 (a +-1 reward): dropped, too incorrect
        2: [0.5] * 4,  # flat graded score: dropped, too correct (mean above 0)
        3: [1.0, -1.0, 1.0, -1.0],  # mixed with mean 0: kept
        4: [1.0] * 4,  # flat: dropped
        5: [0.0, 0.25, 0.25, 0.25],  # mixed graded: kept
        6: [0.0] * 4,  # flat at 0: dropped
    }
    alloc = allocator(
        "dapo",
        [
            "algorithm.agg_metric=score",
            "data.train_batch_size=6",
            "data.gen_batch_size=6",
            "actor_rollout_ref.rollout.n=4",
        ],
    )
    tally = StepState()
    rows = rollout_rows(np.repeat(list(groups), 4), np.concatenate(list(groups.values())), metric="score")
    (request,), result = play_round(alloc, tally, prompt_rows(list(groups)), lambda r: {r[0].name: rows})
    assert (request.kind, request.n) == (GROUP, 4)
    (segment,) = result.segments
    assert segment.column("index").tolist() == [3] * 4 + [5] * 4
    assert len(segment.rows) == 8  # a step of many rounds holds only the kept rows of each, not the whole round
    assert (tally.passed, tally.too_correct, tally.too_incorrect) == (2, 2, 2)
    assert tally.committed_ids == {3, 5}


def test_a_step_cut_at_an_epoch_end_keeps_its_counts_and_timings_but_not_its_batch():
    """Catches: the rollouts or generation timings of a partial batch dropped at an epoch end going uncounted."""
    cut = StepState(
        rounds=2,
        dropped_rounds=1,
        pilot_rollouts=32,
        commit_rollouts=16,
        padding_rollouts=2,
        downsampled_rollouts=4,
        passed=3,
        committed_ids={1, 2},
        segments=[object()],
        timing={"gen": 1.5},
        generation_timings=[({"agent_loop/generate_sequences/min": 0.2}, 8)],
    )
    fresh = cut.carry_counts_only(epoch=1)
    assert (fresh.began_at_epoch, fresh.rounds, fresh.dropped_rounds) == (1, 0, 3)
    assert (fresh.pilot_rollouts, fresh.commit_rollouts, fresh.padding_rollouts, fresh.downsampled_rollouts) == (
        32,
        16,
        2,
        4,
    )
    assert (fresh.passed, fresh.committed_ids, fresh.segments) == (0, set(), [])
    assert fresh.timing == {"gen": 1.5} and fresh.generation_timings == cut.generation_timings


# ------------------------------------------------------------------ the staleness bound, as the allocator applies it
def test_a_buffered_pilot_commits_up_to_one_step_past_the_bound_and_is_flushed_after_it():
    """Catches: buffered pilots kept one step longer than algorithm.buffer_max_off_steps allows (or one step less)."""
    max_off = 1
    alloc = allocator(
        "pilot_commit",
        [
            "data.train_batch_size=8",
            "data.gen_batch_size=2",
            f"algorithm.exploration.n={N_PILOT}",
            f"algorithm.buffer_max_off_steps={max_off}",
        ],
    )
    pilot_round(alloc, [2, 2], N_PILOT, step=1)  # both prompts wait in the buffer from step 1
    for step in range(1, max_off + 2):
        assert alloc.end_step(step)[m.BUFFER_FLUSHED] == 0, f"flushed after step {step}, within the bound"
    assert len(alloc.buffer) == 2
    # Step 2 + max_off: one of them is committed, max_off + 1 steps after its pilot ...
    state = StepState(committed_ids=set(range(900, 907)))  # the step needs one more prompt
    commit_round(alloc, state, [0, 0], 200, {100, 101}, step=max_off + 2)
    assert np.concatenate(state.commit_ages).tolist() == [max_off + 1]
    # ... and the other is flushed after that step.
    assert alloc.end_step(max_off + 2)[m.BUFFER_FLUSHED] == 1 and len(alloc.buffer) == 0


# ------------------------------------------------------------------ the step's committed prompts, handed to each round
def test_a_prompt_committed_earlier_in_the_step_is_neither_buffered_nor_committed_again():
    """Catches: rounds that do not see the prompts the step has already committed (``StepView.committed_ids``): a
    prompt piloted again in the same step (after an epoch boundary) would be buffered and committed a second time."""
    alloc = allocator(
        "pilot_commit",
        [
            "data.train_batch_size=4",
            "data.gen_batch_size=2",
            f"algorithm.exploration.n={N_PILOT}",
            f"actor_rollout_ref.rollout.n={N_COMMIT}",
        ],
    )
    state = StepState()

    def generate(requests):
        rows = {}
        for r in requests:  # every pilot in the band (2 of 4 correct), every commit 1 of 3
            ids = np.repeat(r.prompts.non_tensor_batch["index"], r.n)
            pattern = [1.0, 1.0, 0.0, 0.0] if r.kind == PILOT else [1.0, 0.0, 0.0]
            rows[r.name] = rollout_rows(ids, np.tile(pattern, len(ids) // r.n))
        return Generation(rows)

    loop = step_loop(alloc)
    for ids in ([100, 101], [200, 201], [100, 101], [300, 301]):  # 100 and 101 come back, as in a new epoch
        loop.run_round(state, prompt_rows(ids), 1, generate)
    assert state.committed_ids == {100, 101, 200, 201}
    trained = np.concatenate([s.column("index") for s in state.segments])
    assert sorted(np.unique(trained, return_counts=True)[1].tolist()) == [N_PILOT + N_COMMIT] * 4
    assert not {100, 101} & {e.prompt_id for e in alloc.buffer.entries()}


def test_a_plan_without_rows_calls_no_generation_and_hands_back_empty_rows():
    """Catches: an empty plan or request sent to generation (verl's concat and torch.cat refuse empty lists)."""
    from recipe.pc.allocators.base import Allocator, Request, RoundPlan, RoundResult

    class LeavesOut(Allocator):
        def plan(self, prompts, view):
            if prompts.non_tensor_batch["index"][0] == 1:
                return RoundPlan(())
            return RoundPlan((Request("none", prompts.select_idxs([]), 4, GROUP), Request("zero", prompts, 0, GROUP)))

        def absorb(self, plan, generated, view):
            self.seen.append({name: len(rows) for name, rows in generated.items()})
            return RoundResult()

    alloc = LeavesOut(allocator("pilot_commit").pc, np.random.default_rng(0))
    alloc.seen = []

    def generate(requests):
        raise AssertionError(f"generation called for {requests}")

    state, loop = StepState(), step_loop(alloc)
    for ids in ([1, 2], [3, 4]):
        loop.run_round(state, prompt_rows(ids), 1, generate)
    assert alloc.seen == [{}, {"none": 0, "zero": 0}]
    assert state.sampled_rollouts == 0 and (state.rounds, loop.counters.gen_round) == (2, 2)


def test_grpo_trains_every_group_and_counts_as_filter_passes_only_those_a_spread_filter_keeps():
    """GRPO's groups all train (``passed``), but the cost model's filter pass rate counts the groups whose rollouts
    disagree, which GRPO reports through ``Verdict.filter_passed`` and the step folds through ``Verdict.passes``."""
    groups = {1: [1.0, 0.0, 1.0, 1.0], 2: [1.0] * 4, 3: [0.0] * 4, 4: [0.0, 1.0, 0.0, 0.0]}
    alloc = allocator("grpo", ["data.train_batch_size=4", "actor_rollout_ref.rollout.n=4"])
    tally = StepState()
    rows = rollout_rows(np.repeat(list(groups), 4), np.concatenate(list(groups.values())))
    _, result = play_round(alloc, tally, prompt_rows(list(groups)), lambda r: {r[0].name: rows})
    assert tally.committed_ids == {1, 2, 3, 4} and tally.passed == 4
    assert tally.filter_passes == 2 and [v.passes for v in result.verdicts] == [2]


@pytest.mark.parametrize(("committed", "ready"), [(5, True), (4, False)])
def test_a_step_at_its_round_limit_trains_with_exactly_min_train_prompts(committed, ready):
    """At max_num_gen_batches rounds a step with min_train_prompts committed goes on (>=, not >); one short of it
    keeps generating."""
    alloc = allocator("pilot_commit", ["data.train_batch_size=8", "algorithm.max_num_gen_batches=3"])
    loop = step_loop(alloc)
    loop.min_train_prompts, loop.warn = 5, False
    state = StepState(rounds=3, committed_ids=set(range(committed)))
    assert loop.ready(state, step=1) is ready
    state.rounds = 2  # below the limit a step waits for its whole batch
    assert loop.ready(state, step=1) is False


# ------------------------------------------------------------------ the reference preset's whole-buffer draw
# Pilots of 8 in the band [0.125, 0.25] (pc_trainer.yaml): 1 or 2 correct passes, 1 spreading less than 2.
FIRST_ROUND = {15: 1, 11: 2, 13: 1, 10: 2, 14: 1, 12: 2}  # prompt id: correct of 8, in the order piloted
SECOND_ROUND = {25: 0, 21: 2, 23: 2, 20: 8, 24: 0, 22: 8}  # two more in the band, 21 then 23
THIRD_ROUND = dict.fromkeys([35, 31, 33, 30, 34, 32], 0)


@pytest.fixture(scope="module")
def reference_config():
    sizes = ["data.train_batch_size=4", "data.gen_batch_size=6", "algorithm.exploration.n=8"]
    return compose_pc_config(["preset=reference", *sizes, "actor_rollout_ref.rollout.n=4"])  # composed once: ~1 s


@pytest.mark.parametrize("sampling", ["random", "max_variance", "most_recent"])  # random: the preset's own
def test_the_reference_preset_commits_a_whole_buffer_in_the_order_it_was_buffered(reference_config, sampling):
    """Two steps of the step loop under preset=reference: step 1 buffers six prompts, draws four of them and buffers
    two more; step 2 needs four, the buffer holds four (from two rounds), and they are committed in buffer order."""
    config = copy.deepcopy(reference_config)
    config.algorithm.buffer_sampling_method = sampling
    alloc = make_allocator(PCSettings.from_config(config), np.random.default_rng(0))
    correct = {**FIRST_ROUND, **SECOND_ROUND, **THIRD_ROUND}
    commits = []

    def generate(requests):
        rows = {}
        for r in requests:
            ids = r.prompts.non_tensor_batch["index"]
            if r.kind == COMMIT:
                commits.append(ids.tolist())
                values = np.tile([1.0, 0.0, 0.0, 0.0], len(ids))
            else:
                values = np.concatenate([[1.0] * correct[i] + [0.0] * (r.n - correct[i]) for i in ids])
            rows[r.name] = rollout_rows(np.repeat(ids, r.n), values)
        return Generation(rows)

    loop, rounds = step_loop(alloc), (prompt_rows(list(ids)) for ids in (FIRST_ROUND, SECOND_ROUND, THIRD_ROUND))
    for step in (1, 2):
        assert loop.fill(StepState(), rounds, step, generate)
        loop.end_step(step, epoch=0)
    first_draw, whole_buffer = commits
    assert len(first_draw) == 4 and set(first_draw) < set(FIRST_ROUND)  # a partial draw: two wait in the buffer
    buffered = [i for i in FIRST_ROUND if i not in first_draw] + [21, 23]
    assert whole_buffer == buffered
