"""Where a run's wall time and CPU went (`harnessrl profile`): the costs read back from what the run
recorded (`run_profile.py`, with the `CpuMeter` the step uses to measure) and their tables (`tables.py`)."""
