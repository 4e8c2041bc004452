"""``agentstores bench``: adapter throughput and latency beside each backend's raw floor."""

from .floor import FLOOR_GROUP, RawFloor, floor_for_url, load_floor

__all__ = ["FLOOR_GROUP", "RawFloor", "floor_for_url", "load_floor"]
