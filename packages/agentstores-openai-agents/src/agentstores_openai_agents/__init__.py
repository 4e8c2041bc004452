"""agentstores for the OpenAI Agents SDK: its Session protocol over an agentstores
conversation, fenced by the turn lease."""

__all__: list[str] = []
