"""`harnessrl sft`: supervised fine-tuning on recorded calls (`fine_tune.py`, the data in `data.py`), and
the reference demonstrations that give it a cold start (`demos.py` drives the harnesses with the
reference policy of `reference.py`)."""
