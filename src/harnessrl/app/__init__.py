"""The commands and recipes of `harnessrl ...`, on top of the library: each command module
registers its commands (`main.py` gathers them), and the recipes they share live here too
(`serve_config.py`: the RunConfig `serve` / `rollout` / `eval` serve with; `harness_check.py`;
`proxy_session.py`). The library never imports this package (tests/test_import_graph.py)."""
