"""harnessrl: RL for LLM agents through real, unmodified agent harnesses.

Data flow: task -> sandbox -> harness --HTTP--> proxy (render -> engine -> store)
-> verifier reward -> prefix tree per group -> advantages -> tree-packed update -> weight sync.
"""

__version__ = "0.1.0"
