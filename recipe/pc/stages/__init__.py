"""Stages that compose with any allocator: the prompt filters (the interface and registry in ``prompt_filter``,
history-based skipping in ``skip``). PODS down-sampling is an allocation primitive (``recipe.pc.allocation``)."""

# verl first, as in recipe.pc.allocators: an external module it imports may register a prompt filter.
import verl  # noqa: F401  isort: skip

from recipe.pc.stages import prompt_filter, skip  # noqa: F401  (importing registers the prompt filters)
