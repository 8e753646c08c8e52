"""Rollout allocators, one module each, registered by their ``algorithm.rollout_allocation`` name."""

from recipe.pc.allocators import dapo, grpo, knapsack, pilot_commit  # noqa: F401  (importing registers them)
from recipe.pc.allocators.base import ALLOCATORS, Allocator, Request, make_allocator

__all__ = ["ALLOCATORS", "Allocator", "Request", "make_allocator"]
