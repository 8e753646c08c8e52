"""Reward functions for verl's reward loop (``reward.custom_reward_function``)."""
