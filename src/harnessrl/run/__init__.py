"""The run: orchestration of one training run (config, plan -> collect -> learn -> report)."""
