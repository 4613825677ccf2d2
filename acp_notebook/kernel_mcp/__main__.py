"""`python -m acp_notebook.kernel_mcp --socket PATH`: relay stdio to the kernel's MCP server."""

from __future__ import annotations

import sys

from .relay import main

if __name__ == "__main__":
    sys.exit(main())
