"""`python -m acp_notebook.run`: the same as the `acp-notebook` console script."""

import sys

from .cli import main

sys.exit(main())
