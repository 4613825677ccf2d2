"""The anyio side: the agent process, the JSON-RPC peer, sessions, turns, client methods."""
