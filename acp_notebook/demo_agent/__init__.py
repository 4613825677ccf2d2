"""The embedded demo ACP agent: `python -m acp_notebook.demo_agent`.

acp_notebook starts it when no agent is configured, so a new user sees every feature of the
client (thoughts, plans, tool calls, a permission prompt with a diff, file writes, command
output, Markdown answers, usage and cost, modes, config options, slash commands, session
list/load/resume/close, Stop, failed turns) without a network or an API key.

It speaks ACP v1 as newline-delimited JSON-RPC 2.0 on stdin/stdout and logs to stderr only.
It is stdlib-only and imports nothing else from acp_notebook, so it starts in a few tens of
milliseconds. The main thread keeps reading stdin while each turn runs in its own thread, so
`session/cancel` and the client's answers to the agent's own requests arrive mid-turn.

Environment: ACP_NOTEBOOK_DEMO_SPEED multiplies every delay (default 1, about 2 s a turn;
0 = no delays, for tests). Prompts starting with /fail end in a JSON-RPC error, /slow streams
for about 20 s (to try Stop), /plan only plans, /explain never edits.

Modules, bottom up: `methods` (the ACP method names), `wire` (JSON-RPC framing, request
matching, a turn's cancellation), `session` (what the agent offers and one session's
state), `text` (content blocks and chunks), `turn` (the scripted turn), `agent` (the
dispatcher), `__main__` (the process).
"""
