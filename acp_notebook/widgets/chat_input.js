// The chat's message box (see chat_input.py): Enter sends, Shift+Enter is a newline, an empty
// message cannot be sent. It also keeps the chat's log following new output until the user
// scrolls up.

const FOLLOW_SLACK_PX = 24; // "at the bottom", give or take a line

function follow(el) {
  // The log is a sibling widget (an ipywidgets Box, which cannot follow by itself); it may be
  // attached after this view, so look for it a few frames.
  let log = null;
  let stuck = true;
  let observer = null;
  let frame = 0;
  let tries = 0;
  const onScroll = () => {
    stuck = log.scrollHeight - log.scrollTop - log.clientHeight <= FOLLOW_SLACK_PX;
  };
  const attach = () => {
    log = el.closest(".acpnb-chat")?.querySelector(".acpnb-chat-log") ?? null;
    if (!log) {
      if (++tries < 600) frame = requestAnimationFrame(attach);
      return;
    }
    log.addEventListener("scroll", onScroll, { passive: true });
    let placed = -1; // where this code last scrolled the log to
    observer = new MutationObserver(() => {
      // Moved up since we placed it: the user scrolled, even if the scroll event (dispatched
      // on the next frame) has not come yet; output arriving first must not undo that.
      if (placed >= 0 && log.scrollTop < placed - FOLLOW_SLACK_PX) stuck = false;
      if (stuck) {
        log.scrollTop = log.scrollHeight;
        placed = log.scrollTop;
      }
    });
    observer.observe(log, { childList: true, subtree: true, characterData: true });
  };
  attach();
  return () => {
    cancelAnimationFrame(frame);
    observer?.disconnect();
    log?.removeEventListener("scroll", onScroll);
  };
}

function render({ model, el }) {
  const box = document.createElement("textarea");
  box.className = "acpnb-chat-text";
  box.rows = 3;
  const send = document.createElement("button");
  send.className = "acpnb-chat-send jupyter-button mod-primary";
  send.textContent = "Send";
  send.title = "Send (Enter); Shift+Enter for a new line";

  const refresh = () => {
    if (box.value !== model.get("value")) box.value = model.get("value");
    box.placeholder = model.get("placeholder");
    box.disabled = model.get("disabled");
    send.disabled = model.get("disabled") || !box.value.trim();
  };
  const submit = () => {
    const text = box.value;
    if (!text.trim() || model.get("disabled")) return;
    model.send({ event: "submit", text });
    box.value = "";
    model.set("value", "");
    model.save_changes();
    refresh();
  };
  box.addEventListener("input", () => {
    model.set("value", box.value);
    model.save_changes();
    refresh();
  });
  box.addEventListener("keydown", (event) => {
    // The page's shortcuts stay out of the box (JupyterLab runs the cell on Shift+Enter).
    event.stopPropagation();
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      submit();
    }
  });
  send.addEventListener("click", submit);
  const traits = ["change:value", "change:placeholder", "change:disabled"];
  for (const name of traits) model.on(name, refresh);
  refresh();
  el.classList.add("acpnb-chat-input");
  el.append(box, send);
  const unfollow = follow(el);
  return () => {
    unfollow();
    for (const name of traits) model.off(name, refresh);
  };
}

export default { render };
