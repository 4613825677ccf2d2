"""One scripted, streamed coding-agent turn: thought, plan, read, edit with permission, run."""

from __future__ import annotations

from .session import CONTEXT_SIZE, NOTES_FILE, now_iso
from .text import CODE_SAMPLE, chunks, text_block
from .tools import ToolSteps
from .wire import INTERNAL_ERROR, Cancelled, RpcError, log


class DemoFailure(Exception):
    """The /fail command: the turn ends in a JSON-RPC error."""


class DemoTurn(ToolSteps):
    """One scripted, streamed coding-agent turn about the user's prompt."""

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
