"""Environments and source RL algorithms that produce learning histories (one folder per task)."""
