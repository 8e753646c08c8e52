"""Which of the dataloader's prompts go into rounds: the trainer's one interface for pre-generation stages.

The default keeps every prompt, a dataloader batch a round. ``algorithm.skip.enable`` swaps in GRESO skipping
(``recipe.pc.stages.skip.SkippingFilter``), which leaves out prompts whose recent groups all agreed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import numpy as np
from verl import DataProto


class PromptFilter:
    """Keeps every prompt; subclasses override what they change."""

    state_key: ClassVar[str | None] = None  # the checkpoint key of ``state_dict`` (None: no state)

    def rounds(self, batches: Iterator[DataProto], rng: np.random.Generator) -> Iterator[DataProto]:
        """This epoch's rounds of new prompts, from the dataloader's batches."""
        yield from batches

    def observe(self, result) -> None:
        """A round's ``RoundResult``, for filters that learn from the groups an allocator classified."""

    def end_step(self, epoch: int) -> dict:
        """The filter's metrics of the step."""
        return {}

    def end_epoch(self, evicted_ids) -> None:
        """Prompts evicted at the epoch's end are not to be generated."""

    def state_dict(self) -> dict | None:
        """Plain data for the checkpoint (None: nothing to save)."""
        return None

    def load_state_dict(self, state: dict) -> None:
        """Restore what ``state_dict`` wrote."""

    def summary(self) -> str:
        return ""

    def exhaustion_hint(self, prompts: int, step: int, epochs: int) -> str:
        """A note for the warning when the data runs out before total_training_steps."""
        return ""


def make_prompt_filter(pc) -> PromptFilter:
    if not pc.skip.enable:
        return PromptFilter()
    from recipe.pc.stages.skip import SkippingFilter

    return SkippingFilter(pc.skip, pc.gen_batch_size)
