"""Stages that compose with any allocator: the prompt filters (the interface and registry in ``prompt_filter``,
history-based skipping in ``skip``) and variance down-sampling (``downsample``)."""

from recipe.pc.stages import prompt_filter, skip  # noqa: F401  (importing registers the prompt filters)
