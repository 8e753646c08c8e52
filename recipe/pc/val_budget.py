"""Validation at rollout budgets (``trainer.val_rollout_interval``).

Steps of different allocators cost different numbers of rollouts (a PC step's cost varies, a GRPO step's does not),
so validating every k steps puts two runs' points at different budgets. With an interval I the trainer validates at
the end of the first step whose cumulative generated rollouts (``rollout_stats/cumulative_rollouts_sample``, pilots
included) reach each multiple of I, so every budget has a point at most one step's rollouts past it. A step that
crosses several multiples validates once and stands for each of them.

A checkpoint holds the multiples validated when it was written. A step saves before it validates, so the budgets of
the checkpoint's own step are not among them: a resumed run validates them first (the policy is that step's), and a
run stopped between its save and its validation loses no point. A checkpoint written before this state existed
counts every multiple up to its restored count as validated.
"""

from __future__ import annotations

from recipe.pc import metric_names as m


class BudgetSchedule:
    """Which multiples of ``interval`` a run has reached and validated; ``interval`` None is off."""

    def __init__(self, interval: int | None):
        self.interval = interval
        self.validated = 0  # multiples 1 .. validated of the interval have had their validation
        self.restored = False  # validated came from a checkpoint

    @property
    def on(self) -> bool:
        return self.interval is not None

    def due(self, cumulative: int) -> list[int]:
        """The budgets that ``cumulative`` generated rollouts reach and no validation has stood for yet, in order."""
        if not self.on:
            return []
        return [k * self.interval for k in range(self.validated + 1, cumulative // self.interval + 1)]

    def state_dict(self) -> dict:
        return {"validated": self.validated}

    def load_state_dict(self, state: dict) -> None:
        self.validated = int(state["validated"])
        self.restored = True

    def resume(self, cumulative: int) -> None:
        """Start from a run that had generated ``cumulative`` rollouts: from the restored state, or, for a checkpoint
        without one, as if every budget they reach had been validated."""
        if self.on and not self.restored:
            self.validated = cumulative // self.interval

    def record(self, budgets: list[int], cumulative: int) -> dict:
        """The metrics of a validation of the policy trained on ``cumulative`` rollouts, standing for ``budgets``
        (``due``'s answer, or none); every budget up to ``cumulative`` counts as validated from now on."""
        if not self.on:
            return {}
        self.validated = max(self.validated, cumulative // self.interval)
        metrics = {
            m.VAL_BUDGETS_REACHED: len(budgets),
            m.VAL_BUDGET_INTERVAL: self.interval,
            m.VAL_BUDGET_ROLLOUTS: cumulative,
        }
        if budgets:
            metrics[m.VAL_BUDGET] = budgets[-1]
        return metrics
