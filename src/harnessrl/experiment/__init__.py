"""`harnessrl experiment`: arms x seeds of training runs against one shared baseline eval per seed
(`arms.py`, `shared_baseline.py`), and their results over seeds (`results.py`, `seed_bootstrap.py`)."""
