"""Stages that compose with any allocator: history-based skipping (skip) and variance down-sampling (downsample)."""
