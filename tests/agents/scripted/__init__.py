"""A scripted ACP v1 agent, for testing ACP clients. Standard library only.

Wire format: newline-delimited JSON-RPC 2.0 on stdin/stdout; logs go to stderr.
Initialize-time behaviour comes from command-line flags (``parse_args``). Each prompt turn is
driven by the prompt itself: if its first text block starts with ``#script `` the JSON list
after it is run step by step (``turn.Turn._STEPS``); any other text is echoed as ``echo: <text>``.

Steps (one action key each; other keys are options):
  say / think / user TEXT [message_id]   agent_message / agent_thought / user_message chunk
  chunks N [size=20, message_id, every]  N agent_message_chunks, text = index zero-padded to size;
                                         with every=SECONDS, one at a time, that far apart
  huge_say NBYTES                        one agent_message_chunk of NBYTES digits
  update {...} [session_id]              session/update carrying exactly this update
  flood [{...}, ...] times=N [session_id]  N session/updates cycling through these (not recorded)
  plan_entries N                         one plan update with N entries "step <i>"
  after_turn [steps]                     run these steps after the prompt is answered
  next_prompt [steps]                    the session's next prompt (if not a #script) runs these
  request METHOD [params, id, cancel_after, quiet]  call the client, report "RESPONSE <json>"
                                             (not with quiet: true)
  permission {toolCall} [options, id, cancel_after]  same, session/request_permission, "PERMISSION "
  sleep SECONDS                          a session/cancel cuts it short: stopReason cancelled
  wait_cancel true [after_cancel: steps] block until session/cancel, run after_cancel, "cancelled"
  ignore_cancel true | "answer"          ignore cancels; true: also never answer the prompt
  exit CODE / kill_self true             exit now / SIGKILL itself
  stderr NBYTES                          write NBYTES of filler lines to stderr
  raw TEXT / raw_hex HEX                 write these bytes plus "\n" to stdout
  respond_id ID                          a {"result": {}} response to an id never sent
  stop REASON / error {code, message}    how the prompt is answered at the end
  fail_until {counter, attempts, mode}   fail while the counter file's new value <= attempts
  echo_prompt true                       report "PROMPT <json of the prompt blocks>"
  mcp NAME calls=[{name, arguments}]     start the session's MCP server NAME (its mcpServers
                                         entry, as an agent does), call these tools, close it,
                                         report "MCP <json: per call name/text/isError/images,
                                         then {exit: code}>" (scripted/mcp.py); with
                                         during=[steps], the calls go on a thread and these
                                         steps run meanwhile (while a call waits)
  wait_fifo PATH [timeout=60]            block until a test opens the FIFO PATH for writing
                                         and closes it (its signal); nobody: an error

Flags for requests that are never answered (the client's deadlines):
  --hang-method METHOD      never answer METHOD (repeatable; initialize, session/new, ...): the
                            request is recorded, then nothing, not even to $/cancel_request
  --hang-once-marker FILE   with --hang-method: hang only if FILE does not exist, and create it
                            holding this process's pid, so the next agent process answers

Flag ``--config-options-json JSON``: answer session/new, load and resume with exactly this
``configOptions`` value (any JSON, valid or not), instead of the built-in options.

Threads: the main thread only reads stdin and answers the quick requests, so session/cancel,
$/cancel_request and the client's responses to the agent's own requests are seen while a turn
runs. Each turn runs its script on its own daemon thread. Every write to stdout takes one lock,
so lines from different threads never interleave.

Two ways to run it (cli.py): as a process on stdio (``tests/agents/scripted_agent.py`` or
``python -m tests.agents.scripted``), or on a thread of the client's own process, on the streams
of the client's in-process transport (``serve_streams``; ``tests/agents/script.py`` builds the
client option). In-process, ``exit`` and ``kill_self`` close the streams, which is all a client
sees of an agent that is gone; --ignore-sigterm means nothing there.

Modules: wire (constants, encoding, checks), host (process or streams; stdout), store (sessions),
turn (a prompt turn and its steps), agent (reading, the quick requests), cli (both entry points).
"""

from .cli import main, parse_args, serve_streams

__all__ = ["main", "parse_args", "serve_streams"]
