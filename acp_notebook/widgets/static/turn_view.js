// The live view of one agent turn (acp_notebook/widgets/turn_view.py). Plain ES module, no build.
//
// The kernel sends operations on parts keyed by id (widgets/turn_diff.py). Part HTML comes from
// the kernel's renderer, which escapes everything of the agent (raw HTML off, no javascript:
// links); it is parsed inert in a <template> and scrubbed once more here. Streaming text, labels
// and words of our own are set with textContent only. Nothing is re-rendered whole: an opened
// card stays open, a scrolled block keeps its scroll, an expanded output stays expanded.
//
// Copy buttons copy the Markdown source of an answer (sent by the kernel beside its HTML, or
// the streamed text itself), never its HTML. When the turn ends the kernel replaces this view by
// the static record; in JupyterLab the view then adds the same buttons to that record (the page
// only: nothing of them is saved).
//
// A notebook saved while the turn runs (JupyterLab autosaves) would keep only the widget's
// output: reopened without the widget's model, "Error displaying widget: model not found". So in
// JupyterLab, at each save, the view puts a static snapshot of itself (`snapshot`) in the output
// right after its own: hidden while the live view is drawn beside it, shown (and the dead widget
// hidden) where it cannot be (turn_view.css). When the record replaces the view, the snapshot goes.

const WORDS = {
  queued: "queued: sent when the turn before it ends",
  starting: "starting agent…",
  waiting: "waiting for the agent",
  streaming: "streaming",
  asking: "waiting for you",
  stopping: "stopping…",
  done: "done",
  failed: "failed",
  cancelled: "cancelled",
  lost: "the kernel went away: this turn did not finish",
  saved: "running when the notebook was saved: what had arrived by then",
};
const GLYPHS = { done: "✓", failed: "✗", cancelled: "⏹", lost: "⚠" };
const LIVE = new Set(["queued", "starting", "waiting", "streaming", "asking", "stopping"]);
const MATH_OFF = "tex2jax_ignore mathjax_ignore";
// A tool's output, terminal or diff longer than this shows its first lines and "show all".
const SHORT_LINES = 12;
// The ids of a form's labels, inputs and notes: unique on the page, never the agent's text.
let fieldIds = 0;
// The snapshot's class, and where its output's metadata names the view it copies (its token).
const SNAP = "acpnb-tv-snap";
const META = "acp_notebook";

function node(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// Defence in depth: the kernel escapes every byte of the agent's, and what it sends is its own
// renderer's markup (render/html.py, agentmd.py). So only that vocabulary stays: any other
// element goes with its content (script, style, iframe, svg, math, form...), any other attribute
// goes (on*, xlink:href, formaction...), a link only to http(s) without user info, mailto or a
// target on the page's own host, an image only as inline raster data, a style only as one of
// the renderer's few declarations.
// What stays is saved in the notebook (snapshots, the chat's record), trusted when reopened.
const HTML_NS = "http://www.w3.org/1999/xhtml";
const TAGS = new Set(("a b blockquote br code del details div em footer h1 h2 h3 h4 h5 h6 hr i img li " +
  "meter ol p pre s small span strong summary table tbody td th thead tr ul").split(" "));
const STYLE = /^(text-align:(left|right|center)|max-width:100%)$/;
const IMAGE = /^data:image\/(png|jpeg|gif|webp);base64,[a-z0-9+/=]*$/i;
const SCHEME = /^([a-z][a-z0-9+.-]*):/;
// The renderer's classes: its own (acpnb-), a fence's language, a highlighted token's kind
// (render/highlight.py: one letter), MathJax's opt-out. Another
// (JupyterLab's jp-Dialog, lm-..., a theme's) could lay the text over the page, as a style could.
const CLASS = /^(acpnb-[a-z0-9_-]+|language-[A-Za-z0-9_+-]+|[kscmfb]|mathjax_ignore|tex2jax_ignore)$/;
// Browsers drop these from a URL (and ignore its case) before they read its scheme.
const compact = (v) => v.replace(/[\s\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028\u2029\ufeff]/g, "").toLowerCase();

// A link as the browser reads it: http(s) without user info (`https://google.com@evil.example`
// looks like one host and opens another), mailto, or relative on this page's own host (not
// `//evil.example` or `/\evil.example`, which a browser reads as another host).
const BASE = new URL("https://base.acpnb.invalid/dir/page");
function linkAllowed(value) {
  const scheme = SCHEME.exec(compact(value));
  if (scheme && !["http", "https", "mailto"].includes(scheme[1])) return false;
  if (scheme && scheme[1] === "mailto") return true;
  let url;
  try { url = new URL(value, BASE); } catch (_e) { return false; }
  if (url.username || url.password) return false;
  // Empty user info (`https://@evil.example`) the parser drops: refused all the same.
  if (scheme && /^[a-z]+:[/\\]*[^/\\?#]*@/.test(compact(value))) return false;
  return scheme ? /^https?:$/.test(url.protocol) : url.host === BASE.host;
}

function opensHost(href, host) {
  try {
    const url = new URL(href);
    return url.host === host && !url.username && !url.password && /^https?:$/.test(url.protocol);
  } catch (_e) { return false; }
}

function allowed(tag, name, value) {
  switch (name) {
    case "class": case "title": case "data-turn-id": return true;
    case "data-part": return tag === "div"; // a subagent card's part: its buttons go there
    case "data-cell": return tag === "a" && /^[A-Za-z0-9_-]{1,100}$/.test(value); // a cell link (cards.py)
    case "role": return /^[a-z]+$/.test(value);
    case "style": return STYLE.test(value.trim());
    case "align": return /^(left|right|center)$/.test(value);
    case "open": return tag === "details";
    case "value": case "high": return tag === "meter" && /^(0|1|0?\.\d{1,3})$/.test(value);
    case "start": return tag === "ol" && /^\d{1,9}$/.test(value);
    case "alt": return tag === "img";
    case "src": return tag === "img" && IMAGE.test(value.replace(/\s/g, ""));
    case "href": return tag === "a" && linkAllowed(value);
    default: return false; // target and rel of a link are set below
  }
}

function fragment(html) {
  const t = document.createElement("template");
  t.innerHTML = html; // inert: nothing in a template runs or loads
  const todo = [t.content];
  while (todo.length) {
    for (const e of Array.from(todo.pop().children)) {
      const tag = e.namespaceURI === HTML_NS ? e.localName : "";
      if (!TAGS.has(tag) || (tag === "img" && !allowed(tag, "src", e.getAttribute("src") || ""))) {
        e.remove();
        continue;
      }
      for (const a of Array.from(e.attributes)) {
        if (!allowed(tag, a.name, a.value)) e.removeAttribute(a.name);
      }
      const classes = e.getAttribute("class");
      if (classes !== null) {
        const kept = classes.split(/\s+/).filter((c) => CLASS.test(c)).join(" ");
        if (kept) e.setAttribute("class", kept); else e.removeAttribute("class");
      }
      if (tag === "a") { e.setAttribute("target", "_blank"); e.setAttribute("rel", "noopener noreferrer"); }
      todo.push(e);
    }
  }
  return t.content;
}

// Copy text to the clipboard: the async clipboard where the page may use it, else a selection.
async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch (_e) { /* denied or unfocused: try the selection below */ }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.append(area);
  area.select();
  let ok = false;
  try { ok = document.execCommand("copy"); } catch (_e) { ok = false; }
  area.remove();
  return ok;
}

// A button that copies what `get()` returns and says so for a moment.
function copyButton(label, title, get, cls) {
  const b = node("button", `acpnb-tv-copy ${cls}`, label);
  b.type = "button";
  b.title = title;
  let reset = null;
  b.addEventListener("click", async (event) => {
    event.stopPropagation();
    const ok = await copyText(get());
    b.textContent = ok ? "✓ copied" : "copy failed";
    b.dataset.copied = ok ? "yes" : "no";
    clearTimeout(reset);
    reset = setTimeout(() => { b.textContent = label; delete b.dataset.copied; }, 2000);
  });
  return b;
}

// `source` as a new cell below the notebook cell that holds `from`, after those inserted so
// before, by acp_notebook's JupyterLab extension (labextension/, the page event
// `acpnb-insert-cell`, answered at once). False without it, or out of a notebook's cell.
function insertedByPage(from, source) {
  if (document.body.dataset.acpnbNotebook !== "1") return false;
  const detail = { source, inserted: null };
  from.dispatchEvent(new CustomEvent("acpnb-insert-cell", { bubbles: true, detail }));
  return Boolean(detail.inserted);
}

// An "insert below" button: the code as a new cell below the cell this view is in (the agent's,
// or the chat's), by the extension (`insertedByPage`); without it there is no such button.
function insertButton(code) {
  const label = "insert below";
  const b = node("button", "acpnb-tv-copy acpnb-tv-codeinsert", label);
  b.type = "button";
  b.title = "Insert this code as a new cell below (not run)";
  let reset = null;
  b.addEventListener("click", (event) => {
    event.stopPropagation();
    const done = insertedByPage(b, code.textContent.replace(/\n$/, ""));
    b.textContent = done ? "✓ inserted" : "not inserted: no notebook cell here";
    clearTimeout(reset);
    reset = setTimeout(() => { b.textContent = label; }, 2000);
  });
  return b;
}

// A copy button on each code block of the agent's Markdown (`pre > code`) in `box` that has
// none: it copies the code's text. And an insert button where the extension is.
function codeButtons(box) {
  const inserts = document.body.dataset.acpnbNotebook === "1";
  box.querySelectorAll(":is(.acpnb-answer, .acpnb-thought) pre > code").forEach((code) => {
    const pre = code.parentElement;
    if (pre.querySelector(":scope > .acpnb-tv-codecopy")) return;
    pre.prepend(copyButton("copy", "Copy this code", () => code.textContent, "acpnb-tv-codecopy"));
    if (inserts) pre.prepend(insertButton(code));
  });
}

function wholeAnswer(texts) {
  return texts.filter((t) => t.trim()).join("\n\n");
}

// The record that replaced a finished view (same output area, same turn id) gets copy buttons.
function copyInRecord(area, turnId, texts) {
  if (!area || !turnId || !texts.length) return;
  const find = () => area.querySelector(`.acpnb-turn[data-turn-id="${CSS.escape(turnId)}"]:not(.acpnb-tv)`);
  const dress = (rec) => {
    if (rec.dataset.acpnbCopy) return;
    rec.dataset.acpnbCopy = "1";
    const answers = rec.querySelectorAll(".acpnb-answer");
    if (answers.length === texts.length) {
      answers.forEach((a, i) => {
        const b = copyButton("copy", "Copy this message's Markdown", () => texts[i], "acpnb-tv-msgcopy");
        b.style.float = "right";
        b.style.fontSize = ".8em";
        a.before(b);
      });
    }
    codeButtons(rec);
    const footer = rec.querySelector(":scope > footer");
    if (!footer) return;
    const all = copyButton("copy answer", "Copy the whole answer's Markdown", () => wholeAnswer(texts), "acpnb-tv-allcopy");
    all.style.fontSize = ".8em";
    footer.append(" · ", all);
  };
  const now = find();
  if (now) { dress(now); return; }
  const watch = new MutationObserver(() => {
    const rec = find();
    if (rec) { watch.disconnect(); dress(rec); }
  });
  watch.observe(area, { childList: true, subtree: true });
  setTimeout(() => watch.disconnect(), 60_000);
}

// A prompt suggestion (render/html.py's `.acpnb-suggestion`): its text is what it shows, the
// kernel's escaped text of the agent's prompt.
function suggestionOf(event) {
  const b = event.target instanceof Element ? event.target.closest(".acpnb-suggestion") : null;
  if (!b || (event.type === "keydown" && event.key !== "Enter" && event.key !== " ")) return null;
  event.preventDefault();
  return b;
}

// Buttons that work by keyboard too (the kernel's markup has no tabindex: the sanitizer's).
function focusable(box) {
  box.querySelectorAll(".acpnb-suggestion:not([tabindex])").forEach((b) => { b.tabIndex = 0; });
}

// The cells this page inserted below a turn's cell (by its id: their ids), where the extension
// does not insert them (`putInCell`). Its rule, as the extension's (labextension/src/index.ts):
// a new cell goes after the run of those cells directly below the turn's cell, so clicks land
// in click order, top to bottom; the run ends at the first cell that is not one of them (one the
// person put or moved there, or none left), so a new cell never goes past a cell the person
// placed, and one moved away is out of the run.
const insertedBelow = new Map();

// `source` in a new code cell below `cell`, after those inserted so before: JupyterLab's
// notebook model, reached through the widget manager's document context, one step of undo.
// False where there is none (another front-end).
function insertBelow(context, cell, source) {
  const nb = context?.model;
  const cells = nb?.cells;
  if (!cell || !cells || typeof nb.sharedModel?.insertCell !== "function") return false;
  for (let i = 0; i < cells.length; i++) {
    if (cells.get(i) !== cell && cells.get(i).id !== cell.id) continue;
    const mine = insertedBelow.get(cell.id) || new Set();
    let at = i + 1;
    while (at < cells.length && mine.has(cells.get(at).id)) at++;
    let added = null;
    nb.sharedModel.transact(() => { added = nb.sharedModel.insertCell(at, { cell_type: "code", source }); });
    if (added?.id) insertedBelow.set(cell.id, mine.add(added.id));
    return true;
  }
  return false;
}

// What a suggestion clicked in a cell's view or record does: a new cell below, or (no notebook
// model to put it in) the prompt copied; the button says which for a moment. The cell is put
// in as a code block's "insert below" puts its own (`insertButton`): by the extension where it
// is, which places both kinds by one rule (a suggestion then a block land in click order), else
// through the document context.
async function putInCell(b, context, cell, header) {
  const text = (b.textContent || "").trim();
  if (!text) return;
  const source = `${header || "%%agent"}\n${text}`;
  const done = insertedByPage(b, source) || insertBelow(context, cell, source);
  const ok = done || (await copyText(text));
  b.dataset.used = done ? "cell" : ok ? "copied" : "failed";
  b.title = done ? "Put into a new cell below" : ok ? "Copied: no notebook to put it in" : "Could not copy";
}

// The record that replaced a finished view: its suggestions put their prompt in a new cell too.
// Watched for as long as the page shows it: the kernel draws the record again when suggestions
// come after the turn (turn_view.py, `_await_suggestions`), a new element each time.
function suggestInRecord(area, turnId, context, cell, header) {
  if (!area || !turnId || !cell) return;
  const find = () => area.querySelector(`.acpnb-turn[data-turn-id="${CSS.escape(turnId)}"]:not(.acpnb-tv)`);
  const dress = (rec) => {
    if (rec.dataset.acpnbSuggest) return;
    rec.dataset.acpnbSuggest = "1";
    focusable(rec);
    const on = (event) => {
      const b = suggestionOf(event);
      if (b) void putInCell(b, context, cell, header);
    };
    rec.addEventListener("click", on);
    rec.addEventListener("keydown", on);
  };
  const now = find();
  if (now) dress(now);
  new MutationObserver(() => {
    const rec = find();
    if (rec) dress(rec);
  }).observe(area, { childList: true, subtree: true });
}

// plainText(el): static/plain_text.js, and attention(...): static/notify.js, put before this
// module by the Python side.

// A static copy of the view, without its controls: what a saved notebook shows where the widget
// cannot be drawn. Its text is the view's own (text nodes, the kernel's escaped HTML): outerHTML
// escapes it again when serialised; nothing is parsed as HTML anew. `word` restates its state.
function staticCopy(root, state, word) {
  const copy = root.cloneNode(true);
  copy.querySelectorAll("button, .acpnb-tv-choices, .acpnb-tv-form").forEach((e) => e.remove());
  copy.querySelectorAll(".acpnb-running").forEach((e) => e.classList.remove("acpnb-running"));
  copy.querySelectorAll("pre.acpnb-tv-short").forEach((e) => e.classList.remove("acpnb-tv-short"));
  const line = copy.querySelector(".acpnb-tv-state");
  if (word && line) {
    line.textContent = `⚠ ${word}`;
    line.className = `acpnb-tv-state acpnb-tv-${state}`;
    copy.dataset.state = state;
  }
  return copy;
}

// The outputs of the cell that holds the view with this token: the view's index (its text/plain
// names the token) and its snapshot's (its metadata does), -1 where there is none.
function outputsOf(cells, token) {
  for (const cell of cells || []) {
    const outputs = cell.outputs;
    let view = -1;
    let snap = -1;
    for (let i = 0; outputs && i < outputs.length; i++) {
      const o = outputs.get(i);
      if (o.metadata?.[META]?.snapshot_of === token) snap = i;
      else if (String(o.data["text/plain"] || "").includes(token)) view = i;
    }
    if (view >= 0 || snap >= 0) return { cell, outputs, view, snap };
  }
  return null;
}

// Takes an output out of a cell, through public API: the cell model's `sharedModel` and its
// `updateOutputs(start, end, [])` (@jupyter/ydoc), which JupyterLab mirrors into the cell's output
// list. Not through `IOutputAreaModel.remove` (public since 4.3): the cell model passes that
// removal on to the shared model (what is saved) as `updateOutputs(index, count, [])`, an end
// taken for a count, so past index 0 the file keeps the output (cells/src/model.ts, up to 4.7).
function removeOutput(cell, index) {
  const shared = cell.sharedModel;
  if (typeof shared?.updateOutputs === "function") shared.updateOutputs(index, index + 1, []);
  else cell.outputs.remove(index);
}

function clock(seconds) {
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const m = Math.floor(seconds / 60);
  return `${m} min ${Math.floor(seconds - 60 * m)} s`;
}

function render({ model, el, css }) {
  const root = node("div", `acpnb-turn acpnb-tv ${MATH_OFF}`);
  const parts = node("div", "acpnb-tv-parts");
  const tail = node("div", "acpnb-tv-tail");
  root.append(parts, tail);
  el.append(root);

  const status = node("span", "acpnb-tv-state");
  const time = node("span", "acpnb-tv-clock");
  const modelName = node("span", "acpnb-tv-model");
  const stop = node("button", "acpnb-tv-stop", "■ Stop");
  stop.type = "button";
  stop.title = "Cancel this turn (sends session/cancel)";
  // A queued message of the chat (its turn has not started): taken back to the input box.
  const takeBack = node("button", "acpnb-tv-takeback", "↩ take back");
  takeBack.type = "button";
  takeBack.title = "Not sent yet: put this message back in the box";
  takeBack.hidden = true;
  const copyAll = copyButton("copy answer", "Copy the whole answer's Markdown", () => wholeAnswer(answerTexts()), "acpnb-tv-allcopy");
  copyAll.hidden = true;
  const controls = node("span", "acpnb-controls");
  controls.append(copyAll, takeBack, stop);
  const live = node("span", "acpnb-tv-live");
  live.append(status, " · ", time);
  // The footer's start: the state and clock while the turn runs, and the model. A finished
  // turn's footer (the kernel's) says its duration and how it ended: they are not said twice.
  const lead = node("span", "acpnb-tv-lead");
  let footerRest = false; // the kernel's footer has items after the lead

  const byId = new Map();
  const streams = new Map();
  // part id -> its Markdown source (an answer), kept apart from the HTML shown.
  const sources = new Map();
  // "part id/index" of the long outputs the reader expanded: they stay expanded across updates.
  const expanded = new Set();
  let head = { state: "waiting", model: "", pending: [], duration: null };
  let copiedToRecord = false;
  let base = performance.now();
  let lost = false;

  function state() { return lost ? "lost" : head.state; }

  function drawStatus() {
    const s = state();
    const running = LIVE.has(s);
    status.textContent = `${GLYPHS[s] ? GLYPHS[s] + " " : running ? "◌ " : ""}${WORDS[s] || s}`;
    status.className = `acpnb-tv-state acpnb-tv-${s}${running ? " acpnb-running" : ""}`;
    root.dataset.state = s;
    // The chat has one Stop of its own for all its turns (head.stop false): none in the view.
    stop.hidden = !running || s === "queued" || head.stop === false;
    takeBack.hidden = s !== "queued";
    stop.disabled = s === "stopping";
    if (s === "stopping") stop.textContent = "Stopping…";
    copyAll.hidden = !answerTexts().some((t) => t.trim());
    modelName.textContent = head.model || "";
    drawLead(running);
    tick();
  }

  let leadDrawn = "";
  function drawLead(running) {
    const withLive = running || lost || head.duration == null;
    const key = `${withLive}|${!!head.model}|${footerRest}`;
    if (key === leadDrawn) return; // unchanged: no DOM mutation (the chat's log observes them)
    leadDrawn = key;
    const items = [];
    if (withLive) items.push(live);
    if (head.model) items.push(modelName);
    const out = [];
    items.forEach((item, i) => out.push(...(i ? [" · ", item] : [item])));
    if (out.length && footerRest) out.push(" · ");
    lead.replaceChildren(...out);
  }

  function tick() {
    if (LIVE.has(state())) time.textContent = clock((performance.now() - base) / 1000);
    else if (head.duration != null && !lost) time.textContent = clock(head.duration);
  }

  // The footer line (kernel HTML) gets the state, the clock, the model and Stop.
  function dressFooter() {
    let footer = tail.querySelector("footer");
    if (!footer) { footer = node("footer"); tail.append(footer); }
    footerRest = footer.childNodes.length > 0;
    footer.prepend(lead);
    footer.append(controls);
    drawLead(LIVE.has(state()));
  }

  function place(id, after) {
    let wrap = byId.get(id);
    if (!wrap) {
      wrap = node("div", "acpnb-tv-part");
      wrap.dataset.partId = id;
      byId.set(id, wrap);
      const prev = after ? byId.get(after) : null;
      if (prev) prev.after(wrap); else if (after) parts.append(wrap); else parts.prepend(wrap);
    }
    return wrap;
  }

  // The Markdown sources of the answers, in the order they are shown.
  function answerTexts() {
    const out = [];
    for (const wrap of parts.children) {
      const id = wrap.dataset.partId;
      if (streams.has(id) && wrap.querySelector(".acpnb-answer")) out.push(streams.get(id).data);
      else if (sources.has(id) && wrap.querySelector(".acpnb-answer")) out.push(sources.get(id));
    }
    return out;
  }

  // The cards of the tool calls a pending permission asks about (part ids, from head.pending):
  // open, with everything in them, their outputs whole (a box that scrolls past ~30 lines,
  // turn_view.css), so what the person is asked about is in sight. `openedFor`: the cards opened
  // so, once each (a reader may close one again).
  let asked = new Set();
  const openedFor = new Set();
  function showAsked(wrap, id) {
    const now = asked.has(id);
    wrap.classList.toggle("acpnb-tv-asked", now);
    if (!now) return;
    if (!openedFor.has(id)) {
      openedFor.add(id);
      wrap.querySelectorAll("details").forEach((d) => { d.open = true; });
    }
    wrap.querySelectorAll("pre.acpnb-tv-short").forEach((pre) => {
      pre.classList.remove("acpnb-tv-short");
      const more = pre.nextElementSibling;
      if (more?.classList.contains("acpnb-tv-more")) more.remove();
    });
  }

  // A long output of a tool card (text, terminal, diff) shows its first lines and a button, but
  // in a card a permission asks about (whole: `showAsked`).
  function shorten(wrap, id) {
    if (asked.has(id)) return;
    wrap.querySelectorAll(".acpnb-tool pre").forEach((pre, i) => {
      const lines = pre.textContent.replace(/\n$/, "").split("\n").length;
      if (lines <= SHORT_LINES) return;
      const key = `${id}/${i}`;
      const more = node("button", "acpnb-tv-more");
      more.type = "button";
      const draw = () => {
        const open = expanded.has(key);
        pre.classList.toggle("acpnb-tv-short", !open);
        pre.classList.toggle("acpnb-tv-full", open);
        more.textContent = open ? "show less" : `show all (${lines.toLocaleString("en")} lines)`;
      };
      more.addEventListener("click", (event) => {
        event.stopPropagation();
        if (expanded.has(key)) expanded.delete(key); else expanded.add(key);
        draw();
      });
      draw();
      pre.after(more);
    });
  }

  // A copy button for an answer: beside it, outside its text.
  function dress(wrap, id) {
    if (wrap.querySelector(".acpnb-answer") && (sources.has(id) || streams.has(id))) {
      const get = () => (streams.has(id) ? streams.get(id).data : sources.get(id) || "");
      wrap.prepend(copyButton("copy", "Copy this message's Markdown", get, "acpnb-tv-msgcopy"));
    }
    codeButtons(wrap);
    shorten(wrap, id);
  }

  // Replace a part's content, keeping which of its cards are open and where its blocks scroll.
  function fill(wrap, content) {
    const open = Array.from(wrap.querySelectorAll("details"), (d) => d.open);
    const scroll = Array.from(wrap.querySelectorAll("pre"), (p) => p.scrollTop);
    wrap.replaceChildren(content);
    wrap.querySelectorAll("details").forEach((d, i) => { if (i < open.length) d.open = open[i]; });
    wrap.querySelectorAll("pre").forEach((p, i) => { if (scroll[i]) p.scrollTop = scroll[i]; });
    dress(wrap, wrap.dataset.partId);
  }

  // A streaming message: its text kept for the copy button (`streams`), its Markdown drawn in
  // `drawn`'s box from the kernel's "md" operations (turn_diff.py): finished blocks fixed, the
  // HTML of the growing end (`held`) redrawn from what changed of it.
  const drawn = new Map();
  function stream(op) {
    const wrap = place(op.id, op.after);
    const text = document.createTextNode(op.text);
    const box = node("div");
    let content;
    if (op.role === "thought") {
      content = node("details", "acpnb-thought");
      const summary = node("summary", "", "💭 Thinking…");
      content.append(summary, box);
    } else {
      content = box;
      box.className = "acpnb-answer";
    }
    streams.set(op.id, text);
    drawn.set(op.id, { box, held: "", tail: [] });
    fill(wrap, content);
  }

  function markdown(op) {
    const m = drawn.get(op.id);
    if (!m || typeof op.add !== "string") return;
    const html = m.held.slice(0, op.keep) + op.add;
    const freeze = op.freeze || 0;
    for (const n of m.tail) n.remove();
    const fixed = freeze ? fragment(html.slice(0, freeze)) : null;
    const added = fixed ? Array.from(fixed.childNodes) : [];
    if (fixed) m.box.append(fixed);
    m.held = html.slice(freeze);
    const end = fragment(m.held);
    m.tail = Array.from(end.childNodes);
    m.box.append(end);
    // The new blocks' code only (in place, so the selector sees their answer box): a pass over
    // the whole answer each message cost more as it grew.
    for (const n of added.concat(m.tail)) if (n.nodeType === 1) codeButtons(n);
  }

  // A message that stopped streaming ("part", "settle"): its source is sent with it, or
  // (absent) the text that was streamed for it.
  function finished(op) {
    const streamed = streams.get(op.id);
    if (typeof op.md === "string") {
      // "md_from": the page holds the answer's first md_from characters; md is the rest.
      const known = streamed ? streamed.data : (sources.get(op.id) || "");
      const base = typeof op.md_from === "number" ? known.slice(0, op.md_from) : "";
      sources.set(op.id, base + op.md);
    }
    else if (streamed) sources.set(op.id, streamed.data);
    streams.delete(op.id);
    drawn.delete(op.id);
  }

  function apply(op) {
    if (op.op === "reset") { parts.replaceChildren(); byId.clear(); streams.clear(); sources.clear(); drawn.clear(); }
    else if (op.op === "part") {
      finished(op);
      fill(place(op.id, op.after), fragment(op.html));
    }
    else if (op.op === "settle") {
      // What the page drew of its Markdown is its final HTML (turn_diff.py): kept, and a
      // thought's summary line says it is done.
      finished(op);
      const summary = byId.get(op.id)?.querySelector(":scope > details.acpnb-thought > summary");
      if (summary && typeof op.summary === "string") summary.replaceChildren(fragment(op.summary));
    }
    else if (op.op === "stream") stream(op);
    else if (op.op === "append") { const t = streams.get(op.id); if (t) t.appendData(op.text); }
    else if (op.op === "md") markdown(op);
    else if (op.op === "remove") { byId.get(op.id)?.remove(); byId.delete(op.id); streams.delete(op.id); sources.delete(op.id); drawn.delete(op.id); }
    else if (op.op === "tail") { tail.replaceChildren(fragment(op.html)); dressFooter(); }
  }

  // Permission buttons go inside the card of their request; the card of the tool call asked about
  // is opened whole (`showAsked`); the request's options line gives way to them (turn_view.css).
  function drawChoices() {
    for (const [id, wrap] of byId) if (asked.has(id) || wrap.classList.contains("acpnb-tv-asked")) showAsked(wrap, id);
    const pending = new Map((head.pending || []).map((p) => [p.id, p.options]));
    root.querySelectorAll(".acpnb-tv-choices").forEach((c) => {
      if (!pending.has(c.dataset.request)) c.remove();
    });
    for (const [id, options] of pending) {
      // A subagent's request is inside its sub-turn card (keyed by data-part): opened to it.
      const nested = byId.has(id) ? null : root.querySelector(`[data-part="${CSS.escape(id)}"]`);
      for (let d = nested && nested.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) d.open = true;
      const wrap = byId.get(id) || nested;
      if (!wrap || wrap.querySelector(".acpnb-tv-choices")) continue;
      const row = node("div", "acpnb-tv-choices acpnb-permission");
      row.dataset.request = id;
      for (const o of options) {
        const b = node("button", `acpnb-permission-option acpnb-kind-${String(o.kind).replace(/[^a-z_]/g, "")}`, o.label);
        b.type = "button";
        if (o.tip) b.title = o.tip; // the kind, in our words: a name may lie
        b.addEventListener("click", () => {
          row.querySelectorAll("button").forEach((x) => { x.disabled = true; });
          model.send({ type: "choose", id, option: o.id });
        });
        row.append(b);
      }
      (wrap.querySelector(".acpnb-perm") || wrap).append(row);
    }
  }

  // The agent's questions (elicitation/create): a form, or a link, inside their card. Every label
  // is set as text; a link is offered only for http(s), with its host shown before it is opened.
  // A form is a grid: labels in one column, inputs in the other, a field's description and its
  // error under its input. Enter in a one-line field submits (the kernel checks the answer: a
  // mistake comes back next to its field); in a text area it is a new line, Ctrl/⌘+Enter submits.
  function field(f) {
    const id = `acpnb-tv-f${++fieldIds}`;
    const row = node("div", "acpnb-tv-field");
    row.dataset.name = f.name;
    const many = f.type === "array";
    const title = node(many ? "span" : "label", "acpnb-tv-field-title", f.title);
    title.id = `${id}-title`;
    if (!many) title.htmlFor = id;
    if (f.required) {
      const mark = node("span", "acpnb-tv-required", " *");
      mark.title = "required";
      mark.setAttribute("aria-hidden", "true"); // the input says it (aria-required)
      title.append(mark);
    }
    let input;
    if (f.type === "boolean") {
      input = node("input");
      input.type = "checkbox";
      input.checked = f.default === true;
    } else if (many) {
      input = node("div", "acpnb-tv-multi");
      input.setAttribute("role", "group");
      input.setAttribute("aria-labelledby", title.id);
      const chosen = new Set(Array.isArray(f.default) ? f.default : []);
      for (const [value, label] of f.choices) {
        const box = node("input");
        box.type = "checkbox";
        box.value = value;
        box.checked = chosen.has(value);
        const item = node("label", "acpnb-tv-choice");
        item.append(box, " ", label);
        input.append(item);
      }
    } else if (f.choices.length) {
      input = node("select");
      if (!f.required) input.append(node("option", "", ""));
      for (const [value, label] of f.choices) {
        const opt = node("option", "", label);
        opt.value = value;
        opt.selected = value === f.default;
        input.append(opt);
      }
    } else if (f.multiline) {
      input = node("textarea");
      input.rows = 3;
      if (f.default != null) input.value = String(f.default);
    } else {
      input = node("input");
      input.type = f.type === "string" ? "text" : "number";
      if (f.type === "integer") input.step = "1";
      if (f.type !== "string") {
        if (f.min != null) input.min = String(f.min);
        if (f.max != null) input.max = String(f.max);
      }
      if (f.default != null) input.value = String(f.default);
    }
    input.id = id;
    input.classList.add("acpnb-tv-input");
    if (f.required) input.setAttribute("aria-required", "true");
    // Under the input: its description, then what was wrong with the answer (kept empty).
    const note = node("div", "acpnb-tv-field-note");
    const described = [];
    if (f.description) {
      const about = node("div", "acpnb-tv-field-desc acpnb-muted", f.description);
      about.id = `${id}-desc`;
      described.push(about.id);
      note.append(about);
    }
    const error = node("div", "acpnb-tv-field-error");
    error.id = `${id}-error`;
    error.setAttribute("aria-live", "polite");
    described.push(error.id);
    note.append(error);
    (many ? input.querySelector("input") || input : input).setAttribute("aria-describedby", described.join(" "));
    row.append(title, input, note);
    return row;
  }

  function values(box, form) {
    const out = {};
    for (const f of form.fields) {
      const row = box.querySelector(`[data-name="${CSS.escape(f.name)}"] .acpnb-tv-input`);
      if (!row) continue;
      if (f.type === "boolean") out[f.name] = row.checked;
      else if (f.type === "array") out[f.name] = Array.from(row.querySelectorAll("input:checked"), (i) => i.value);
      else out[f.name] = row.value;
    }
    return out;
  }

  // The kernel's word on the last answer: next to the field it is about (focused, when the
  // focus is in the form: the person just submitted), else under the form.
  function showError(box, form) {
    const rows = box.querySelectorAll(".acpnb-tv-field");
    let at = null;
    rows.forEach((row) => {
      const mine = !!form.error && row.dataset.name === form.errorField;
      row.querySelector(".acpnb-tv-field-error").textContent = mine ? form.error : "";
      const input = row.querySelector(".acpnb-tv-input");
      if (mine) { input.setAttribute("aria-invalid", "true"); at = input; }
      else input.removeAttribute("aria-invalid");
    });
    box.querySelector(".acpnb-tv-form-error").textContent = at ? "" : form.error || "";
    if (at && box.contains(document.activeElement)) (at.matches("input, select, textarea") ? at : at.querySelector("input"))?.focus();
  }

  // Someone typing elsewhere (another cell's editor or an input with text in it, another form)
  // keeps the keyboard: a form that appears must not take what they type next, nor their Enter.
  function typingElsewhere() {
    const a = document.activeElement;
    if (!a || a === document.body) return false;
    if (root.contains(a)) return !!a.closest(".acpnb-tv-form");
    if (!(a.isContentEditable || a.matches("input, textarea, select"))) return false;
    if (el.closest(".jp-Cell")?.contains(a)) return false; // the cell that asked: it just ran
    return !!String((a.isContentEditable ? a.textContent : a.value) || "").trim();
  }

  // A form that appears takes the keyboard, on its first field, when nobody types elsewhere
  // and it is on screen (the page does not scroll to it: nothing jumps).
  function focusFirst(box) {
    const first = box.querySelector(".acpnb-tv-field :is(input, select, textarea)");
    if (!first || typingElsewhere()) return;
    const r = box.getBoundingClientRect();
    if (r.bottom <= 0 || r.top >= window.innerHeight) return;
    first.focus({ preventScroll: true });
  }

  function drawForms() {
    const forms = new Map((head.forms || []).map((f) => [f.id, f]));
    root.querySelectorAll(".acpnb-tv-form").forEach((box) => {
      const form = forms.get(box.dataset.request);
      if (!form) { box.remove(); return; }
      // Each refused answer is numbered: a new one lets the form be sent again.
      if (String(form.tries || 0) !== box.dataset.tries) {
        box.dataset.tries = String(form.tries || 0);
        delete box.dataset.busy;
        box.querySelectorAll("button").forEach((b) => { b.disabled = false; });
        showError(box, form);
      }
    });
    for (const [id, form] of forms) {
      const wrap = byId.get(id);
      if (!wrap || wrap.querySelector(".acpnb-tv-form")) continue;
      const box = node("div", "acpnb-tv-form");
      box.dataset.request = id;
      box.dataset.tries = String(form.tries || 0);
      if (form.mode === "url") {
        // The host the browser will open (the kernel's WHATWG reading of the link), and an
        // internationalised one in Unicode too: a homograph shows as two different names.
        const where = node("div", "", "Opens ");
        if (form.unicodeHost) where.append(`${form.unicodeHost}, punycode `);
        where.append(node("code", "acpnb-tv-host", form.host || "?"), ": ");
        // A link only when this browser opens the very host shown (and no user info).
        if (form.host && /^https?:\/\//i.test(form.url) && opensHost(form.url, form.host)) {
          const a = node("a", "", form.url);
          a.href = form.url;
          a.target = "_blank";
          a.rel = "noopener noreferrer";
          where.append(a);
        }
        box.append(where);
      } else {
        const grid = node("div", "acpnb-tv-fields");
        for (const f of form.fields) grid.append(field(f));
        box.append(grid);
      }
      const error = node("div", "acpnb-tv-form-error");
      error.setAttribute("aria-live", "polite");
      const buttons = node("div", "acpnb-tv-buttons");
      const send = (action) => {
        if (box.dataset.busy) return; // sent: the kernel's answer comes first
        box.dataset.busy = "1";
        buttons.querySelectorAll("button").forEach((b) => { b.disabled = true; });
        model.send({ type: "answer", id, action, values: form.mode === "url" ? {} : values(box, form) });
      };
      const accept = form.mode === "url" ? "Done, accept" : "Submit";
      for (const [action, label, hint] of [["accept", accept, form.mode === "url" ? "" : "Submit (Enter)"], ["decline", "Decline", ""], ["cancel", "Cancel", ""]]) {
        const b = node("button", `acpnb-permission-option acpnb-tv-${action}`, label);
        b.type = "button";
        if (hint) b.title = hint;
        b.addEventListener("click", () => send(action));
        buttons.append(b);
      }
      box.addEventListener("keydown", (event) => {
        const accel = event.ctrlKey || event.metaKey;
        // JupyterLab's shortcuts stay out of the form (Shift+Enter would run the cell again,
        // "D D" on a checkbox delete it, Escape leave it); its Ctrl/⌘ ones (save) still work.
        if (!accel || event.key === "Enter") event.stopPropagation();
        if (event.key !== "Enter" || event.isComposing || event.altKey || form.mode === "url") return;
        const t = event.target;
        if (!(t instanceof Element) || t.closest("button, a")) return; // Enter presses it
        if (t.localName === "textarea" && !accel) return; // a new line
        event.preventDefault();
        send("accept");
      });
      // What was typed since a refusal: its field's word on it is stale.
      box.addEventListener("input", (event) => {
        const row = event.target instanceof Element ? event.target.closest(".acpnb-tv-field") : null;
        if (!row) return;
        row.querySelector(".acpnb-tv-field-error").textContent = "";
        row.querySelector(".acpnb-tv-input").removeAttribute("aria-invalid");
      });
      box.append(error, buttons);
      // In the card, before its state line: the question, the form, then "waiting for you".
      const card = wrap.querySelector(".acpnb-elicit") || wrap;
      card.insertBefore(box, card.querySelector(":scope > .acpnb-elicit-outcome"));
      if (form.error) showError(box, form); // a view that (re)connected after a refusal
      if (form.mode !== "url") focusFirst(box);
    }
  }

  // Says when the turn ends or asks while the person looks elsewhere (notify.js).
  const heed = attention({ el: root, model });

  function onMessage(msg) {
    if (!msg || !Array.isArray(msg.ops)) return;
    const before = state();
    // Before the ops: a card asked about is drawn whole as it arrives (`shorten`).
    if (msg.head) asked = new Set((msg.head.pending || []).map((p) => p.call).filter((c) => typeof c === "string" && c));
    if (typeof msg.elapsed === "number" && LIVE.has(msg.head?.state)) {
      base = Math.min(base, performance.now() - msg.elapsed * 1000);
    }
    for (const op of msg.ops) apply(op);
    if (msg.head) head = msg.head;
    // The turn's id, on the view and so on its static copies: the chat's record holds each
    // turn once (chat_input.js, keepUnfinished).
    if (typeof head.turn === "string" && head.turn) root.dataset.turnId = head.turn;
    if (!tail.contains(lead)) dressFooter();
    drawChoices();
    drawForms();
    drawStatus();
    focusable(parts);
    heed.update(before, state(), head, Math.max((performance.now() - base) / 1000, head.duration || 0));
    if (!LIVE.has(head.state) && !lost && !copiedToRecord && head.turn) {
      copiedToRecord = true;
      copyInRecord(el.closest(".jp-OutputArea"), head.turn, answerTexts());
      if (head.suggest !== "input") {
        suggestInRecord(el.closest(".jp-OutputArea"), head.turn, model.widget_manager?.context, home(), head.next);
      }
      // A snapshot saved mid-turn shows the end until the record replaces it (a page reloaded
      // mid-turn never gets that update: then the snapshot is what stays).
      if (here()?.snap >= 0) snapshot();
    }
  }

  // Which parts' cards the reader opened: the record drawn at the end keeps them open.
  // Numbered: the front-end may send widget messages on several kernel subshells, so they can
  // arrive out of order, and an older list must not undo a newer one.
  let openedSeq = 0;
  function onToggle() {
    const ids = [];
    for (const [id, wrap] of byId) if (wrap.querySelector("details[open]")) ids.push(id);
    model.send({ type: "opened", ids, seq: ++openedSeq });
  }

  function gone() {
    if (!LIVE.has(head.state) || lost) return;
    lost = true;
    drawStatus();
    setTimeout(freeze, 0);
  }

  // The kernel is gone, so nobody will replace this view by the turn's record: in JupyterLab the
  // view puts a static copy of itself (our own markup, no buttons) in place of its output, so a
  // saved notebook shows what had arrived instead of "Error displaying widget: model not found".
  function freeze() {
    const at = here();
    if (!at || at.view < 0) return;
    const copy = staticCopy(root);
    const data = { "text/html": withStyle(copy), "text/plain": plainText(copy) };
    at.outputs.set(at.view, { output_type: "display_data", data, metadata: {} });
    if (at.snap >= 0) removeOutput(at.cell, at.snap); // the copy says it all, once
  }

  function here() {
    const token = model.get("token");
    return token ? outputsOf(model.widget_manager?.context?.model?.cells, token) : null;
  }

  // The cell this view is an output of (its record stays there): found once, while it is.
  let homeCell = null;
  function home() { return (homeCell ||= here()?.cell || null); }

  // A prompt suggestion clicked: in the chat, to its input box (the kernel checks it is one of
  // the turn's); in a cell, into a new `%%agent` cell below.
  function onSuggestion(event) {
    const b = suggestionOf(event);
    if (!b) return;
    if (head.suggest === "input") {
      const text = (b.textContent || "").trim();
      if (text) model.send({ type: "suggest", text });
      b.dataset.used = "input";
      return;
    }
    void putInCell(b, model.widget_manager?.context, home(), head.next);
  }

  // The stylesheet goes with the copy: reopened, no widget brings it (nor the rules that hide
  // a dead widget's output before a snapshot, turn_view.css). `css`: the loader's (loader.js).
  function withStyle(copy) { return `<style>${css || ""}</style>${copy.outerHTML}`; }

  // The notebook is being saved (JupyterLab emits "started" before it reads the notebook): the
  // view's state now goes in the snapshot output after the view's, added or refreshed. Hidden on
  // this page (turn_view.css): the live view is not touched, so nothing flickers.
  function snapshot() {
    const at = lost ? null : here();
    if (!at || at.view < 0) return;
    const running = LIVE.has(state());
    const copy = staticCopy(root, "saved", running ? WORDS.saved : "");
    copy.classList.add(SNAP);
    const data = { "text/html": withStyle(copy), "text/plain": plainText(copy) };
    const out = { output_type: "display_data", data, metadata: { [META]: { snapshot_of: model.get("token") } } };
    if (at.snap >= 0) at.outputs.set(at.snap, out);
    else if (at.view + 1 === at.outputs.length) at.outputs.add(out);
    else if (typeof at.outputs.list?.insert === "function") {
      // Not the last output: inserted after the view (the adjacent rules of turn_view.css). The
      // output list (`list`, protected in TypeScript) is the one way that keeps page and file in
      // step: `IOutputAreaModel` has no insert; the shared model's insert is appended by
      // JupyterLab ("inserting an output always results in appending it"); moving the later
      // outputs down with `set`/`add` redraws them and merges adjacent streams. Without the
      // list (a JupyterLab that hides it), no snapshot: the notebook saves as before.
      const item = at.outputs.contentFactory.createOutputModel({ value: out, trusted: at.outputs.trusted });
      at.outputs.list.insert(at.view + 1, item);
    } else return;
    watch(at.outputs);
  }

  // Once the record stands in the view's place (or the cell is cleared), the snapshot goes: the
  // record stands alone. Checked after each change of the cell's outputs while a snapshot is in.
  let watched = null;
  const onOutputs = () => queueMicrotask(settle);
  function watch(outputs) {
    if (watched === outputs) return;
    watched?.changed?.disconnect?.(onOutputs);
    watched = outputs;
    outputs.changed.connect(onOutputs);
  }
  function settle() {
    const at = here();
    if (at && at.snap >= 0 && at.view < 0) removeOutput(at.cell, at.snap);
    if (!at || at.view < 0) { watched?.changed?.disconnect?.(onOutputs); watched = null; }
  }
  const context = model.widget_manager?.context;
  const onSave = (_c, s) => { if (s === "started") snapshot(); };
  context?.saveState?.connect?.(onSave);
  // A saved snapshot from before a reload: watched too, so the record still replaces it.
  const before = here();
  if (before && before.snap >= 0) watch(before.outputs);

  takeBack.addEventListener("click", () => {
    takeBack.disabled = true;
    model.send({ type: "take_back" });
  });
  stop.addEventListener("click", () => {
    stop.disabled = true;
    stop.textContent = "Stopping…";
    model.send({ type: "stop" });
  });
  root.addEventListener("toggle", onToggle, true);
  parts.addEventListener("click", onSuggestion);
  parts.addEventListener("keydown", onSuggestion);
  model.on("msg:custom", onMessage);

  // A restarted or dead kernel never ends this turn: say so instead of "running" for ever.
  const kernel = model.widget_manager?.kernel;
  const onStatus = (_k, s) => { if (s === "restarting" || s === "autorestarting" || s === "dead") gone(); };
  kernel?.statusChanged?.connect?.(onStatus);
  const timer = setInterval(() => {
    if (kernel && (kernel.isDisposed || kernel.status === "dead")) gone();
    tick();
  }, 100);

  dressFooter();
  drawStatus();
  // The live view: a snapshot output after it is hidden (turn_view.css).
  el.classList.add("acpnb-tv-view");
  model.send({ type: "sync" });
  return () => {
    context?.saveState?.disconnect?.(onSave);
    clearInterval(timer);
    kernel?.statusChanged?.disconnect?.(onStatus);
    model.off("msg:custom", onMessage);
  };
}

export default { render };
