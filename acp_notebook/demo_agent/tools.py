"""The demo turn's tool calls: read the notes, edit them with permission, run a check."""

from __future__ import annotations

import time

from . import methods
from .context import TurnContext
from .session import NOTES_FILE, PERMISSION_OPTIONS
from .text import text_content
from .wire import JSON, NOT_FOUND, Cancelled, RpcError, log


class ToolSteps(TurnContext):
    """Each method streams one tool call, from `pending` to `completed` or `failed`."""

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
