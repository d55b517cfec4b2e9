"""The step of a training run: open the run (open_run.py), plan and collect a step's groups
(step_groups.py, through the collector seam), build trees and advantages, update, sync, evaluate
(evaluate.py), checkpoint and record; finish with the report (finish.py). What a run reports lives in
report/ and profile/; experiments and SFT, built on runs, in experiment/ and sft/."""
