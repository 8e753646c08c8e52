"""Rollout allocators, one module each, registered by their ``algorithm.rollout_allocation`` name."""

# verl first: its start-up imports the modules named in VERL_USE_EXTERNAL_MODULES, and one that registers an allocator
# imports recipe.pc.allocators.base, which must not meet this package half-built.
import verl  # noqa: F401  isort: skip

from recipe.pc.allocators import dapo, grpo, knapsack, pilot_commit  # noqa: F401  (importing registers them)
from recipe.pc.allocators.base import ALLOCATORS, Allocator, Request, make_allocator

__all__ = ["ALLOCATORS", "Allocator", "Request", "make_allocator"]
