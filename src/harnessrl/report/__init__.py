"""What a run reports, read from what it recorded: the step record (`record.py`), the terminal display,
the metrics log and tracker, report.md and its plots, harness dynamics, the held-out change and the
transfer matrix. The step (run/) writes records and calls these; nothing here imports run/."""
