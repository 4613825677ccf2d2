"""`python -m tests.agents.scripted`: the scripted agent as a process on stdio."""

from .cli import main

main()
