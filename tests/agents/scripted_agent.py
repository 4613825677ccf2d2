#!/usr/bin/env python3
"""The scripted agent as a process on stdio: the entry point for tests that need a real process.

The agent itself is the package next to this file (`scripted/`, documented there); this file
runs it without the repository on the path, so a bare `python scripted_agent.py FLAGS` works.
"""

import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from scripted.cli import main

    main()
