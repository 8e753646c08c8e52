"""Pilot-Commit rollout allocation for GRPO-style RL, as a recipe on stock verl."""
