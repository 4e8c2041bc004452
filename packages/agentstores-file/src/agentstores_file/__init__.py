"""Backend package."""
