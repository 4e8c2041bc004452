"""agentstores for Google ADK: a BaseSessionService over any agentstores backend, with exact
stale-writer refusal and paged reads."""

__all__: list[str] = []
