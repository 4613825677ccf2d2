"""The kernel side: runtime (agents and named sessions), live cell output, %%agent and %agent."""
