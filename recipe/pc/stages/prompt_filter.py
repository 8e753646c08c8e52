"""Which of the dataloader's prompts go into rounds: the trainer's one interface for pre-generation stages, and the
registry that picks one by ``algorithm.prompt_filter``.

``all`` keeps every prompt, a dataloader batch a round; ``skip`` (``recipe.pc.stages.skip.SkippingFilter``, also picked
by ``algorithm.skip.enable=true``) leaves out prompts whose recent groups all agreed. A new filter is one module with a
``@register_prompt_filter``-ed subclass (docs/architecture.md, "Writing a prompt filter").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import numpy as np
from verl import DataProto

from recipe.pc.errors import PCConfigError
from recipe.pc.registry import PROMPT_FILTERS, KeyGroup, register_keys


def register_prompt_filter(cls: type[PromptFilter]) -> type[PromptFilter]:
    if not cls.name or cls.name in PROMPT_FILTERS:
        raise ValueError(f"prompt filter {cls.__name__} needs a unique name, got {cls.name!r}")
    if cls.keys is not None:
        register_keys(cls.keys)
    PROMPT_FILTERS[cls.name] = cls
    return cls


def prompt_filter_class(name: str) -> type[PromptFilter]:
    """The registered prompt filter of ``algorithm.prompt_filter=name``."""
    if name not in PROMPT_FILTERS:
        raise PCConfigError(f"algorithm.prompt_filter={name!r}; choose one of {sorted(PROMPT_FILTERS)}")
    return PROMPT_FILTERS[name]


@register_prompt_filter
class PromptFilter:
    """Keeps every prompt; subclasses override what they change."""

    name: ClassVar[str] = "all"  # the value of algorithm.prompt_filter
    state_key: ClassVar[str | None] = None  # the checkpoint key of ``state_dict`` (None: no state)
    # Its own config keys (a ``KeyGroup`` with a default for each, e.g. under algorithm.<name>.*), read with
    # ``pc.group(cls.keys)``; None: none.
    keys: ClassVar[type[KeyGroup] | None] = None

    @classmethod
    def from_settings(cls, pc) -> PromptFilter:
        """The filter for the run's settings (``PCSettings``)."""
        return cls()

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
    return prompt_filter_class(pc.prompt_filter_name).from_settings(pc)
