"""One scripted, streamed coding-agent turn: thought, plan, read, edit with permission, run.

`DemoTurn` holds what every step uses (the prompt, the session, pacing, the wire), the tool calls
(each streamed from `pending` to `completed` or `failed`) and the script that runs them."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from . import methods
from .session import CONTEXT_SIZE, NOTES_FILE, PERMISSION_OPTIONS, Session, now_iso
from .text import CODE_SAMPLE, attachment_names, chunks, excerpt, text_block, text_content
from .wire import INTERNAL_ERROR, JSON, NOT_FOUND, Cancelled, RpcError, Turn, Wire, log


class DemoFailure(Exception):
    """The /fail command: the turn ends in a JSON-RPC error."""


class DemoTurn:
    """One scripted, streamed coding-agent turn about the user's prompt."""

    def __init__(
        self,
        wire: Wire,
        can: Callable[[str], bool],
        speed: float,
        session: Session,
        turn: Turn,
        blocks: list[JSON],
    ) -> None:
        """`can(capability)` tells whether the client advertised it, e.g. "terminal"."""
        self.wire, self.can, self.session, self.turn = wire, can, session, turn
        self.blocks = blocks
        self.text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        stripped = self.text.strip()
        self.command = stripped.split(None, 1)[0][1:] if stripped.startswith("/") else ""
        rest = stripped.split(None, 1)[1] if self.command and " " in stripped else ""
        self.quote = excerpt(rest) or excerpt(stripped) or "(no text)"
        self.attachments = attachment_names(blocks)
        self.number = session.turns + 1
        self.pace = speed * (9 if self.command == "slow" else 1)  # ~20 s
        if session.config["model"] == "demo-thorough":
            self.pace *= 1.3
        self.notes_path = os.path.join(session.cwd, NOTES_FILE)
        self.answer: list[str] = []
        self.plan: list[JSON] = []
        self.summary: dict[str, str] = {}

    def send(self, update: JSON) -> None:
        self.turn.check()  # after a cancel, nothing more but the prompt response
        self.wire.notify(methods.SESSION_UPDATE, {"sessionId": self.session.id, "update": update})

    def pause(self, seconds: float) -> None:
        self.turn.sleep(seconds * self.pace)

    def ask(self, method: str, params: JSON) -> JSON:
        """Calls the client and waits; raises RpcError on an error, Cancelled on cancel."""
        self.turn.check()
        _, pending = self.wire.request(method, {"sessionId": self.session.id, **params})
        response = self.turn.wait(pending)
        error = response.get("error")
        if isinstance(error, dict) or "result" not in response:
            error = error if isinstance(error, dict) else {}
            raise RpcError(
                int(error.get("code", INTERNAL_ERROR)),
                str(error.get("message", "error")),
                error.get("data"),
            )
        result = response["result"]
        return result if isinstance(result, dict) else {}

    def update_tool(self, call: str, status: str, **fields: Any) -> None:
        """Sends a `tool_call_update` for `call`: its new status and any other fields."""
        update = {"sessionUpdate": "tool_call_update", "toolCallId": call, "status": status}
        self.send({**update, **fields})

    def call_id(self, name: str) -> str:
        return f"call_{self.number}_{name}"

    # -- the tool calls: each streams one, from `pending` to `completed` or `failed` ---------

    def read_notes(self) -> str | None:
        """Reads the notes file (via the client if it can), None if it does not exist yet."""
        call = self.call_id("read")
        self.send(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": call,
                "title": f"Read {NOTES_FILE}",
                "kind": "read",
                "status": "pending",
                "locations": [{"path": self.notes_path, "line": 1}],
                "rawInput": {"path": self.notes_path},
            }
        )
        self.pause(0.05)
        self.update_tool(call, "in_progress")
        self.pause(0.2)
        content = self.fetch_notes()
        if content is None:
            shown = f"`{NOTES_FILE}` does not exist yet; the edit will create it."
            self.summary["read"] = "not there yet"
        else:
            lines = content.splitlines()
            more = f"\n… ({len(lines) - 12} more lines)" if len(lines) > 12 else ""
            shown = "```markdown\n" + "\n".join(lines[:12]) + "\n```" + more
            self.summary["read"] = f"{len(lines)} lines"
        self.update_tool(call, "completed", content=[text_content(shown)])
        return content

    def fetch_notes(self) -> str | None:
        if self.can("fs.readTextFile"):
            try:
                content = self.ask(methods.FS_READ_TEXT_FILE, {"path": self.notes_path}).get(
                    "content"
                )
                return content if isinstance(content, str) else None
            except RpcError as error:
                if error.code == NOT_FOUND:
                    return None
                log(f"fs/read_text_file failed ({error.message}); reading the disk instead")
        # Reading is harmless, and the edit must know the current text to only append.
        try:
            with open(self.notes_path, encoding="utf-8") as file:
                return file.read()
        except (OSError, UnicodeDecodeError):
            return None

    def new_notes(self, old_text: str | None) -> str:
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        section = [f"## Demo turn {self.number} ({stamp})", "", f"- Prompt: “{self.quote}”"]
        if self.attachments:
            section.append(f"- Attachments: {', '.join(self.attachments)}")
        section += ["- Next step: configure a real ACP agent for real work.", ""]
        if old_text is None:
            return "# Demo notes\n\n" + "\n".join(section)
        return old_text + ("" if old_text.endswith("\n") else "\n") + "\n" + "\n".join(section)

    def edit_notes(self, old_text: str | None) -> str | None:
        """Proposes the edit, asks permission, writes it if allowed; returns the new text."""
        call, new_text = self.call_id("edit"), self.new_notes(old_text)
        diff = {"type": "diff", "path": self.notes_path, "oldText": old_text, "newText": new_text}
        tool = {
            "toolCallId": call,
            "title": f"Edit {NOTES_FILE}",
            "kind": "edit",
            "status": "pending",
            "content": [diff],
            "locations": [{"path": self.notes_path}],
            "rawInput": {"path": self.notes_path},
        }
        self.send({"sessionUpdate": "tool_call", **tool})
        decision = self.session.edit_policy or self.ask_permission(tool)
        if decision != "allow":
            self.summary["edit"] = "not allowed, so nothing changed"
            self.update_tool(call, "failed", content=[text_content("The edit was not allowed.")])
            return old_text
        self.update_tool(call, "in_progress")
        self.pause(0.1)
        content = self.write_notes(call, diff, new_text)
        if content is None:
            return old_text
        self.pause(0.1)
        self.update_tool(call, "completed", content=content)
        return new_text

    def write_notes(self, call: str, diff: JSON, new_text: str) -> list[JSON] | None:
        """Writes through the client if it can; returns the tool call's final content.

        None if the client refused the write (the tool call is then marked failed).
        """
        if not self.can("fs.writeTextFile"):
            self.summary["edit"] = "allowed (shown as a diff: the client cannot write files)"
            return [
                diff,
                text_content(
                    "Preview only: the client does not offer "
                    "fs/write_text_file, so nothing was written."
                ),
            ]
        try:
            self.ask(methods.FS_WRITE_TEXT_FILE, {"path": self.notes_path, "content": new_text})
        except RpcError as error:
            self.summary["edit"] = f"allowed, but the client refused the write ({error})"
            failure = text_content(f"Could not write {self.notes_path}: {error.message}")
            self.update_tool(call, "failed", content=[diff, failure])
            return None
        self.summary["edit"] = "allowed and written through the client"
        return [diff]

    def ask_permission(self, tool: JSON) -> str:
        """Returns "allow" or "reject"; a cancelled outcome ends the turn."""
        try:
            result = self.ask(
                methods.REQUEST_PERMISSION, {"toolCall": tool, "options": PERMISSION_OPTIONS}
            )
        except RpcError as error:
            log(f"session/request_permission failed: {error.message}; not editing")
            return "reject"
        outcome = result.get("outcome")
        outcome = outcome if isinstance(outcome, dict) else {}
        if outcome.get("outcome") != "selected":
            raise Cancelled  # "cancelled" (or nonsense): stop, as the spec asks
        option = outcome.get("optionId")
        if option in ("allow_always", "reject_always"):
            self.session.edit_policy = str(option).split("_")[0]  # no prompt next turn
        return "allow" if option in ("allow", "allow_always") else "reject"

    def run_check(self, notes: str | None) -> None:
        lines = len(notes.splitlines()) if notes else 0
        message = f"{NOTES_FILE}: {lines} lines, turn {self.number} checked"
        call = self.call_id("run")
        self.send(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": call,
                "title": f'Run echo "{message}"',
                "kind": "execute",
                "status": "pending",
                "rawInput": {"command": "echo", "args": [message], "cwd": self.session.cwd},
            }
        )
        self.pause(0.1)
        if self.can("terminal"):
            self.run_in_terminal(call, message)
            return
        self.update_tool(call, "in_progress")
        self.pause(0.25)
        self.summary["run"] = "simulated output (the client offers no terminal)"
        self.update_tool(
            call,
            "completed",
            content=[text_content(f'```console\n$ echo "{message}"\n{message}\n```')],
            rawOutput={"exitCode": 0, "stdout": message + "\n"},
        )

    def run_in_terminal(self, call: str, message: str) -> None:
        try:
            created = self.ask(
                methods.TERMINAL_CREATE,
                {
                    "command": "echo",
                    "args": [message],
                    "cwd": self.session.cwd,
                    "outputByteLimit": 4096,
                },
            )
        except RpcError as error:
            self.summary["run"] = f"the client could not start it ({error.message})"
            self.update_tool(
                call, "failed", content=[text_content(f"terminal/create failed: {error.message}")]
            )
            return
        terminal = {"terminalId": created.get("terminalId")}
        try:
            self.update_tool(call, "in_progress", content=[{"type": "terminal", **terminal}])
            status = self.ask(methods.TERMINAL_WAIT_FOR_EXIT, terminal)
            output = self.ask(methods.TERMINAL_OUTPUT, terminal)
            ok = status.get("exitCode") == 0
            self.summary["run"] = "ran in a client terminal" + ("" if ok else f" ({status})")
            self.update_tool(
                call,
                "completed" if ok else "failed",
                rawOutput={**status, "output": output.get("output")},
            )
        except RpcError as error:
            self.summary["run"] = f"the terminal failed ({error.message})"
            self.update_tool(call, "failed")
        finally:
            self.release(terminal)

    def release(self, terminal: JSON) -> None:
        """The agent MUST release its terminals; after a cancel, without waiting for a reply."""
        if self.turn.cancelled.is_set():
            self.wire.request(methods.TERMINAL_RELEASE, {"sessionId": self.session.id, **terminal})
            return
        try:
            self.ask(methods.TERMINAL_RELEASE, terminal)
        except RpcError as error:
            log(f"terminal/release failed: {error.message}")

    # -- the plan ---------------------------------------------------------------------------

    def set_plan(self, *statuses: str) -> None:
        for entry, status in zip(self.plan, statuses, strict=False):
            entry["status"] = status
        self.send({"sessionUpdate": "plan", "entries": [dict(e) for e in self.plan]})

    # -- the turn ---------------------------------------------------------------------------

    def run(self) -> None:
        stop: str | None = None
        error: RpcError | None = None
        try:
            stop = self.script()
        except Cancelled:
            stop = "cancelled"
        except DemoFailure:
            error = RpcError(
                INTERNAL_ERROR, "demo failure", {"hint": "prompts starting with /fail always fail"}
            )
        except Exception as exc:  # a bug in the demo must still end the turn
            log(f"turn failed: {exc!r}")
            error = RpcError(INTERNAL_ERROR, f"Internal error: {exc}")
        self.finish()
        wire = self.wire
        if error is not None:
            wire.fail(self.turn.request_id, error.code, error.message, error.data)
        else:
            wire.respond(self.turn.request_id, {"stopReason": stop})

    def finish(self) -> None:
        session = self.session
        session.turns = self.number
        session.history.append(("user", self.blocks))
        if self.answer:
            session.history.append(("agent", [text_block("".join(self.answer))]))
        session.updated_at = now_iso()
        # Cleared before the response, so the client may send its next prompt right away.
        session.turn = None

    def script(self) -> str:
        self.pause(0.15)
        self.think()
        if self.command == "fail":
            self.pause(0.3)
            raise DemoFailure
        planning_only = self.command == "plan"
        may_edit = self.session.mode == "code" and self.command != "explain"
        self.plan = [
            {"content": f"Read {NOTES_FILE} for context", "priority": "high"},
            {
                "content": f"Add a section about the prompt to {NOTES_FILE}"
                if may_edit
                else f"Sketch a change to {NOTES_FILE} (no edits in this turn)",
                "priority": "medium",
            },
            {"content": "Check the result with a quick command", "priority": "low"},
        ]
        self.set_plan("pending", "pending", "pending")
        if not planning_only:
            self.pause(0.1)
            self.set_plan("in_progress")
            old_text = self.read_notes()
            self.set_plan("completed", "in_progress")
            new_text = self.edit_notes(old_text) if may_edit else old_text
            if not may_edit:
                self.summary["edit"] = "skipped: this turn does not edit files"
            self.set_plan("completed", "completed", "in_progress")
            self.run_check(new_text)
            self.set_plan("completed", "completed", "completed")
        self.write_answer(planning_only)
        self.report_usage()
        return "end_turn"

    def think(self) -> None:
        thoughts = [f"The user asks: “{self.quote}”. "]
        if self.attachments:
            thoughts.append(f"They attached {', '.join(self.attachments)}. ")
        thoughts += [
            "I'm the demo agent, so I'll walk through a typical coding turn: ",
            f"read {NOTES_FILE}, propose a small additive edit, ",
            "run a quick check, then summarise in Markdown.",
        ]
        if self.command == "fail":
            thoughts = [f"The user asks: “{self.quote}”. ", "Pretending to hit an error…"]
        elif self.session.config["thought_level"] == "high":
            thoughts += [
                " Thinking harder: the edit must only append, ",
                "so existing notes are never lost.",
            ]
        message_id = f"thought_{self.number}"
        for piece in thoughts:
            self.send(
                {
                    "sessionUpdate": "agent_thought_chunk",
                    "content": text_block(piece),
                    "messageId": message_id,
                }
            )
            self.pause(0.12)

    def compose_answer(self, planning_only: bool) -> str:
        session = self.session
        lines = [
            f"## Demo turn {self.number}: a walk through a coding-agent turn",
            "",
            f"> {self.quote}",
            "",
            "I'm acp_notebook's **built-in demo agent**: no model and no network, just a "
            "script showing what a real ACP coding agent streams into this cell.",
            "",
        ]
        if planning_only:
            lines += ["Here is the plan (nothing was run):", ""]
            lines += [f"{i}. {e['content']}" for i, e in enumerate(self.plan, 1)]
            lines += ["", "Send the prompt without `/plan` to run it.", ""]
        else:
            lines += [
                "- **Thought**: collapsed above",
                "- **Plan**: three steps, updated as they ran",
                f"- **Read** `{NOTES_FILE}`: {self.summary.get('read', '-')}",
                f"- **Edit** `{NOTES_FILE}`: {self.summary.get('edit', '-')}",
                f"- **Run** a check: {self.summary.get('run', '-')}",
            ]
        if self.attachments:
            lines.append(f"- **Attached**: {', '.join(self.attachments)}")
        lines += [
            f"- **Settings**: mode `{session.mode}`, model "
            f"`{session.config['model']}`, thinking `{session.config['thought_level']}`",
            "",
            CODE_SAMPLE,
            "Configure a real ACP agent (Claude Code, Gemini CLI, Codex, goose, …) for "
            "real answers. Try `/slow` then Stop, or `/fail` for a failed turn.\n",
        ]
        return "\n".join(lines)

    def write_answer(self, planning_only: bool) -> None:
        message_id = f"msg_{self.session.id}_{self.number}"
        for piece in chunks(self.compose_answer(planning_only)):
            self.send(
                {
                    "sessionUpdate": "agent_message_chunk",
                    "content": text_block(piece),
                    "messageId": message_id,
                }
            )
            self.answer.append(piece)
            self.pause(0.015)

    def report_usage(self) -> None:
        session = self.session
        thorough = session.config["model"] == "demo-thorough"
        session.used = min(
            CONTEXT_SIZE,
            session.used
            + 1800
            + len(self.text) // 4
            + sum(len(p) for p in self.answer) // 4
            + (1500 if thorough else 0),
        )
        session.cost = round(session.cost + (0.0123 if thorough else 0.0031), 6)
        self.send(
            {
                "sessionUpdate": "usage_update",
                "used": session.used,
                "size": CONTEXT_SIZE,
                "cost": {"amount": session.cost, "currency": "USD"},
            }
        )
        if not session.named:  # name the session after its first prompt
            session.named, session.title = True, self.quote
            self.send(
                {
                    "sessionUpdate": "session_info_update",
                    "title": session.title,
                    "updatedAt": now_iso(),
                }
            )
