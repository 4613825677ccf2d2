// The chat's message box (see input.py): Enter sends, Shift+Enter is a newline, an empty
// message cannot be sent; `/` completes the agent's commands and `@` the workspace's files. It
// also keeps the chat's log following new output until the user scrolls up, and when the kernel
// goes away it drops the chat's dead output so the notebook keeps the chat's static record, which
// it keeps up to date while the chat is live (keepRecord).

const FOLLOW_SLACK_PX = 24; // "at the bottom", give or take a line
const SHOWN = 50; // completion items listed at once

function node(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// Keeps the chat's log at its bottom while new output arrives, until the reader scrolls up;
// `latest()` (a message sent, or the "jump to latest" button) follows it again. The button shows
// while the log does not follow and there is more below.
function follow(el, jump) {
  // The log is a sibling widget (an ipywidgets Box, which cannot follow by itself); it may be
  // attached after this view, so look for it a few frames.
  let log = null;
  let stuck = true;
  let observer = null;
  let frame = 0;
  let tries = 0;
  let placed = -1; // where this code last scrolled the log to
  const atBottom = () => log.scrollHeight - log.scrollTop - log.clientHeight <= FOLLOW_SLACK_PX;
  const showJump = () => { jump.hidden = stuck || !log || atBottom(); };
  const down = () => {
    log.scrollTop = log.scrollHeight;
    placed = log.scrollTop;
  };
  const onScroll = () => {
    // A scroll this code made (the log grew, or shrank, meanwhile) is not the reader's.
    if (!(stuck && Math.abs(log.scrollTop - placed) <= FOLLOW_SLACK_PX)) stuck = atBottom();
    showJump();
  };
  const attach = () => {
    log = el.closest(".acpnb-chat")?.querySelector(".acpnb-chat-log") ?? null;
    if (!log) {
      if (++tries < 600) frame = requestAnimationFrame(attach);
      return;
    }
    log.addEventListener("scroll", onScroll, { passive: true });
    observer = new MutationObserver(() => {
      // Moved up since we placed it: the user scrolled, even if the scroll event (dispatched
      // on the next frame) has not come yet; output arriving first must not undo that. Unless
      // it is still at the bottom: a part drawn shorter (a streamed answer become Markdown)
      // moved it up, not the user.
      if (placed >= 0 && log.scrollTop < placed - FOLLOW_SLACK_PX && !atBottom()) stuck = false;
      if (stuck) down();
      showJump();
    });
    observer.observe(log, { childList: true, subtree: true, characterData: true });
    if (stuck) down();
  };
  attach();
  // Follow again from now on: to the bottom at once, and with what arrives next.
  const latest = () => {
    stuck = true;
    if (log) down();
    jump.hidden = true;
  };
  jump.addEventListener("click", latest);
  return {
    latest,
    dispose: () => {
      cancelAnimationFrame(frame);
      observer?.disconnect();
      log?.removeEventListener("scroll", onScroll);
    },
  };
}

// What is being completed at the caret: a command at the start, or an @path after a space.
function token(box) {
  const before = box.value.slice(0, box.selectionStart ?? box.value.length);
  let m = /^\/(\S*)$/.exec(before);
  if (m) return { kind: "/", query: m[1], start: 0 };
  m = /(^|\s)@(\S*)$/.exec(before);
  if (m) return { kind: "@", query: m[2], start: before.length - m[2].length - 1 };
  return null;
}

function completer(model, box, onChoose) {
  const list = node("div", "acpnb-chat-complete");
  list.hidden = true;
  list.setAttribute("role", "listbox");
  let items = [];
  let chosen = 0;
  let at = null;
  let asked = false;

  const matches = (t) => {
    const q = t.query.toLowerCase();
    if (t.kind === "/") {
      return (model.get("commands") || [])
        .filter((c) => c.name.toLowerCase().startsWith(q))
        .map((c) => ({ insert: `/${c.name} `, name: `/${c.name}`, about: c.description || "", value: c.name }));
    }
    if (!asked) { asked = true; model.send({ event: "files" }); }
    const files = model.get("files") || [];
    const first = files.filter((f) => f.toLowerCase().startsWith(q));
    const rest = files.filter((f) => !f.toLowerCase().startsWith(q) && f.toLowerCase().includes(q));
    return [...first, ...rest].map((f) => ({ insert: `@${f} `, name: `@${f}`, about: "", value: f }));
  };

  function draw() {
    list.replaceChildren();
    items.slice(0, SHOWN).forEach((item, i) => {
      const row = node("div", "acpnb-chat-item");
      row.setAttribute("role", "option");
      row.setAttribute("aria-selected", String(i === chosen));
      row.append(node("span", "acpnb-chat-item-name", item.name));
      if (item.about) row.append(node("span", "acpnb-chat-item-about", item.about));
      row.addEventListener("mousedown", (e) => { e.preventDefault(); chosen = i; choose(); });
      list.append(row);
    });
    list.hidden = items.length === 0;
    list.children[chosen]?.scrollIntoView?.({ block: "nearest" });
  }

  function update() {
    at = token(box);
    items = at ? matches(at) : [];
    chosen = Math.min(chosen, Math.max(0, Math.min(items.length, SHOWN) - 1));
    draw();
  }

  // Closed: the next `@` asks the kernel again (files come and go).
  function close() { items = []; at = null; asked = false; draw(); }

  function choose() {
    const item = items[chosen];
    if (!item || !at) return;
    const caret = box.selectionStart ?? box.value.length;
    box.value = box.value.slice(0, at.start) + item.insert + box.value.slice(caret);
    const end = at.start + item.insert.length;
    box.setSelectionRange(end, end);
    onChoose(at.kind, item.value);
    close();
  }

  // True when the key was the completion's (the box must not act on it too).
  function key(event) {
    if (list.hidden) return false;
    const n = Math.min(items.length, SHOWN);
    if (event.key === "ArrowDown") chosen = (chosen + 1) % n;
    else if (event.key === "ArrowUp") chosen = (chosen + n - 1) % n;
    else if (event.key === "Enter" || event.key === "Tab") { choose(); return true; }
    else if (event.key === "Escape") { close(); return true; }
    else return false;
    draw();
    return true;
  }

  const refresh = () => { if (at) update(); };
  model.on("change:files", refresh);
  model.on("change:commands", refresh);
  return { list, update, close, key, dispose: () => { model.off("change:files", refresh); model.off("change:commands", refresh); } };
}

// The chat's static record (record.py) is the output after the chat's (found by its
// token, in its metadata): in a page that holds the notebook (JupyterLab, Notebook 7) this view
// keeps it up to date. It says so with how many turns it holds (`keep`); the kernel then sends
// each turn's piece once (`record`), and the view adds it to the output, joined as
// record.join joins them. A piece it already holds (two views of one chat) is skipped; a
// gap is asked for again.
const MIME_CHAT = "application/vnd.acp-notebook.chat+json";
const PLAIN_JOIN = "\n\n";
const END = "</div>";

// The chat's own output: its metadata names the token (widget.py, _ipython_display_).
const isChat = (output, token) => output.metadata?.acp_notebook?.chat === token;

function recordOutput(model) {
  const token = model.get("token");
  const cells = model.widget_manager?.context?.model?.cells;
  if (!token || !cells) return null;
  for (const cell of cells) {
    const outputs = cell.outputs;
    for (let i = 0; outputs && i + 1 < outputs.length; i++) {
      if (isChat(outputs.get(i), token)) {
        return outputs.get(i + 1).data[MIME_CHAT] ? { outputs, index: i + 1 } : null;
      }
    }
  }
  return null;
}

const joined = (v) => (Array.isArray(v) ? v.join("") : typeof v === "string" ? v : "");

// How many turns the record output holds (0 for anything not shaped as ours).
function held(data) {
  const turns = data[MIME_CHAT]?.turns;
  return Array.isArray(turns) && joined(data["text/html"]).endsWith(END) ? turns.length : 0;
}

function keepRecord(model) {
  let frame = 0;
  let tries = 0;
  const onMessage = (msg) => {
    if (!msg || msg.event !== "record" || !Array.isArray(msg.pieces)) return;
    const at = recordOutput(model);
    if (!at || typeof msg.from !== "number") return;
    const data = at.outputs.get(at.index).data;
    const have = held(data);
    if (msg.from > have) { model.send({ event: "keep", have }); return; }
    const fresh = msg.pieces.slice(have - msg.from);
    if (!fresh.length || (have === 0 && typeof msg.start !== "string")) return;
    let html = have ? joined(data["text/html"]).slice(0, -END.length) : msg.start;
    const plain = have ? [joined(data["text/plain"])] : [];
    const turns = have ? [...data[MIME_CHAT].turns] : [];
    for (const p of fresh) {
      html += String(p.html);
      plain.push(String(p.plain));
      turns.push(p.transcript);
    }
    const bundle = {
      "text/html": html + END,
      "text/plain": plain.join(PLAIN_JOIN),
      [MIME_CHAT]: { turns },
    };
    at.outputs.set(at.index, { output_type: "display_data", data: bundle, metadata: {} });
  };
  model.on("msg:custom", onMessage);
  // The record is displayed just after the chat: it may not be in the notebook yet.
  const claim = () => {
    const at = recordOutput(model);
    if (at) model.send({ event: "keep", have: held(at.outputs.get(at.index).data) });
    else if (model.widget_manager?.context && ++tries < 600) frame = requestAnimationFrame(claim);
  };
  claim();
  return () => { cancelAnimationFrame(frame); model.off("msg:custom", onMessage); };
}

// The turns of the log the record does not hold when the kernel goes (a restart mid-turn, or a
// turn that ended in the view before its piece reached the page), as static copies without
// buttons added to the record: the user's message and what had arrived stay; an unfinished one
// says it did not finish. Each turn once, by its id (turn_view.js puts it on the view, and so on
// its copy): two views of one chat each do this, and the second finds the first's copies held.
const FINAL = new Set(["done", "failed", "cancelled"]);
const LOST = "the kernel went away: this turn did not finish";
const UNSAVED = "the kernel went away before this turn was saved";

// plainText(el): static/plain_text.js, put before this module by the Python side.

// The ids of the turns in the record's HTML (its turns and the copies added), parsed inert.
function heldTurns(html) {
  const t = document.createElement("template");
  t.innerHTML = html;
  return new Set(Array.from(t.content.querySelectorAll(".acpnb-turn[data-turn-id]"), (e) => e.dataset.turnId));
}

function keepUnfinished(model, el) {
  const at = recordOutput(model);
  const log = el.closest(".acpnb-chat")?.querySelector(".acpnb-chat-log");
  if (!at || !log) return;
  const data = at.outputs.get(at.index).data;
  const html = joined(data["text/html"]);
  if (!html.endsWith(END)) return;
  const held = heldTurns(html);
  const copies = [];
  const plain = held.size ? [joined(data["text/plain"])] : [];
  for (const view of log.querySelectorAll(".acpnb-tv")) {
    const id = view.dataset.turnId;
    if (!id || held.has(id)) continue; // nothing drawn yet, or in the record already
    held.add(id);
    const ended = FINAL.has(view.dataset.state);
    // As turn_view.js's staticCopy (a separate module: anywidget loads each file alone): no
    // controls, permission rows or forms, nothing running, long outputs shown whole.
    const copy = view.cloneNode(true);
    copy.querySelectorAll("button, .acpnb-tv-choices, .acpnb-tv-form").forEach((e) => e.remove());
    copy.querySelectorAll(".acpnb-running").forEach((e) => e.classList.remove("acpnb-running"));
    copy.querySelectorAll("pre.acpnb-tv-short").forEach((e) => e.classList.remove("acpnb-tv-short"));
    const state = copy.querySelector(".acpnb-tv-state");
    if (state && !ended) { state.textContent = `⚠ ${LOST}`; state.className = "acpnb-tv-state acpnb-tv-lost"; }
    if (!ended) copy.dataset.state = "lost";
    copies.push(copy.outerHTML);
    const user = view.querySelector(".acpnb-user");
    const said = user ? plainText(user).replace(/^\s*👤\s*You\s*/, "") : "";
    const answer = Array.from(view.querySelectorAll(".acpnb-answer"), (a) => plainText(a).trim()).join("\n\n");
    plain.push(`You: ${said.trim()}\n\n${ended ? `${answer}\n\n(${UNSAVED})` : `(${LOST})`}`);
  }
  if (!copies.length) return;
  const bundle = {
    ...data,
    "text/html": html.slice(0, -END.length) + copies.join("") + END,
    "text/plain": plain.join(PLAIN_JOIN),
  };
  delete bundle["text/markdown"]; // a record saved by an older version: it would not say the turn
  at.outputs.set(at.index, { output_type: "display_data", data: bundle, metadata: {} });
}

// The kernel is gone, so nobody will close this chat: in JupyterLab its output (found by its
// token, in its metadata) is replaced by a line, and the chat's static record after it shows the conversation,
// with the turn that was running when the kernel went (keepUnfinished).
function whenKernelGoes(model, el) {
  let done = false;
  const drop = () => {
    const token = model.get("token");
    const cells = model.widget_manager?.context?.model?.cells;
    if (done || !token || !cells) return;
    done = true;
    keepUnfinished(model, el);
    for (const cell of cells) {
      const outputs = cell.outputs;
      for (let i = 0; outputs && i < outputs.length; i++) {
        if (isChat(outputs.get(i), token)) {
          const data = { "text/plain": "(the chat ended with its kernel; the conversation follows)" };
          outputs.set(i, { output_type: "display_data", data, metadata: {} });
          return;
        }
      }
    }
  };
  const kernel = model.widget_manager?.kernel;
  const onStatus = (_k, s) => { if (s === "restarting" || s === "autorestarting" || s === "dead") setTimeout(drop, 0); };
  kernel?.statusChanged?.connect?.(onStatus);
  const disposed = () => setTimeout(drop, 0);
  kernel?.disposed?.connect?.(disposed);
  return () => {
    kernel?.statusChanged?.disconnect?.(onStatus);
    kernel?.disposed?.disconnect?.(disposed);
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
  const attached = new Set(); // @paths chosen from the completion
  const jump = node("button", "acpnb-chat-latest", "↓ jump to latest");
  jump.type = "button";
  jump.title = "Scroll the chat to its latest output and follow it again";
  jump.hidden = true;
  const follower = follow(el, jump);

  const refresh = () => {
    if (box.value !== model.get("value")) box.value = model.get("value");
    box.placeholder = model.get("placeholder");
    box.disabled = model.get("disabled");
    send.disabled = model.get("disabled") || !box.value.trim();
  };
  const complete = completer(model, box, (kind, value) => {
    if (kind === "@") attached.add(value);
    model.set("value", box.value);
    model.save_changes();
    refresh();
  });
  const submit = () => {
    const text = box.value;
    if (!text.trim() || model.get("disabled")) return;
    const files = [...attached].filter((f) => text.includes(`@${f}`));
    model.send({ event: "submit", text, files });
    follower.latest(); // the message sent, and then its answer, in view
    attached.clear();
    box.value = "";
    model.set("value", "");
    model.save_changes();
    complete.close();
    refresh();
  };
  box.addEventListener("input", () => {
    model.set("value", box.value);
    model.save_changes();
    refresh();
    complete.update();
  });
  box.addEventListener("click", () => complete.update());
  box.addEventListener("blur", () => complete.close());
  box.addEventListener("keydown", (event) => {
    // The page's shortcuts stay out of the box (JupyterLab runs the cell on Shift+Enter).
    event.stopPropagation();
    if (event.isComposing) return;
    if (complete.key(event)) { event.preventDefault(); return; }
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      submit();
    }
  });
  send.addEventListener("click", submit);
  // Stop gave back queued messages (their text is in `value` again): their @files go with them.
  // A message sent from Python (`chat.send(...)`): the log follows it as one typed here.
  const onAttach = (msg) => {
    if (msg?.event === "follow") follower.latest();
    if (msg?.event !== "attach" || !Array.isArray(msg.files)) return;
    for (const f of msg.files) if (typeof f === "string") attached.add(f);
  };
  model.on("msg:custom", onAttach);
  const traits = ["change:value", "change:placeholder", "change:disabled"];
  for (const name of traits) model.on(name, refresh);
  refresh();
  el.classList.add("acpnb-chat-input", "acpnb-chat-live");
  el.append(complete.list, jump, box, send);
  const unwatch = whenKernelGoes(model, el);
  const unkeep = keepRecord(model);
  return () => {
    follower.dispose();
    unwatch();
    unkeep();
    complete.dispose();
    model.off("msg:custom", onAttach);
    for (const name of traits) model.off(name, refresh);
  };
}

export default { render };
