"""``python -m agentstores_contract (URL | --factory MODULE:CALLABLE) ...``: the
``agentstores check`` command, run on its own (same options, output and exit codes)."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
