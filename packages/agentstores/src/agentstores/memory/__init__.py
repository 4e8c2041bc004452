"""The in-memory reference backend (``memory://``). Nothing survives a restart."""
