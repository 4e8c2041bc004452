"""The ``bench`` and ``drill`` subcommands of ``agentstores``, one module each, added by
the tools' plugin (:mod:`agentstores_tools.plugin`)."""
