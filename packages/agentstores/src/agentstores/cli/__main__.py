"""``python -m agentstores.cli``: the same as the ``agentstores`` command."""

import sys

from . import main

sys.exit(main())
