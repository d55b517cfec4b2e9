"""Fixtures of the scale tier."""

import pytest


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster of 6 logical CPUs for one test module (shut down after it if this started it)."""
    from harnessrl.cluster.ray_cluster import connect, shutdown

    started = connect("local", num_cpus=6)
    yield
    if started:
        shutdown()
