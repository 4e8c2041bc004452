"""``agentstores bench``: adapter throughput and latency beside each backend's raw floor."""

from .floor import MemoryFloor, RawFloor, floor_for_url, load_floor

__all__ = ["MemoryFloor", "RawFloor", "floor_for_url", "load_floor"]
