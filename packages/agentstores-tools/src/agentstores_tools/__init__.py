"""agentstores' tooling: the benchmark (``agentstores bench``, each backend beside its raw
driver floor) and the kill-and-resume drill (``agentstores drill``).

Kept apart from core so that an application's install carries none of it. Installed, it
adds both subcommands to ``agentstores`` through the ``agentstores_register_commands`` hook.
"""
