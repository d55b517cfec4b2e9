"""Joining or starting the Ray cluster, and placement groups for the run's actors."""

from __future__ import annotations

from typing import Any

from harnessrl.errors import HarnessRLError


class RayUnavailable(HarnessRLError, RuntimeError):
    """Ray is not installed or the cluster cannot be reached (the message says which, and the fix)."""


def connect(address: str = "local", num_cpus: int | None = None) -> bool:
    """ray.init for the run: "local" starts a cluster inside this process (tests, one machine),
    "auto" joins the cluster `ray start` runs on this node, anything else is an address
    (host:6379, ray://host:10001). Returns True when this call started/joined (the caller shuts
    it down at the end), False when Ray was already initialised."""
    try:
        import ray
    except ImportError as err:
        raise RayUnavailable("cluster.backend=ray needs ray: pip install 'harnessrl[scale]'") from err
    if ray.is_initialized():
        return False
    try:
        if address == "local":
            ray.init(num_cpus=num_cpus, include_dashboard=False, configure_logging=False)
        else:
            ray.init(address=address, include_dashboard=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise RayUnavailable(f"cannot join the Ray cluster at {address!r}: {err} (start one with "
                             "`ray start --head`, or use ray.address=local)") from err
    return True


def shutdown() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()


def placement_group(bundles: list[dict[str, float]], strategy: str, timeout_s: float = 300.0) -> Any:
    """A ready placement group (raises RayUnavailable when the cluster cannot host it in time)."""
    import ray
    from ray.util.placement_group import placement_group as make_pg

    bundles = [{k: v for k, v in b.items() if v > 0} or {"CPU": 0.01} for b in bundles]
    pg = make_pg(bundles, strategy=strategy)
    ready, _ = ray.wait([pg.ready()], timeout=timeout_s)
    if not ready:
        ray.util.remove_placement_group(pg)
        raise RayUnavailable(f"the cluster cannot place {bundles} ({strategy}) within {timeout_s:.0f} s: "
                             f"available {ray.available_resources()}")
    return pg


def in_bundle(pg: Any, index: int) -> Any:
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    return PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=index)
