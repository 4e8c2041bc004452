"""agentstores for Pydantic AI: message history stored per run in an agentstores conversation,
exactly once, under the turn lease."""

__all__: list[str] = []
