// The turn view's `_esm` (widgets/turn_view.py): a loader, so that the view's module and
// stylesheet (~48 KB) cross the wire once a page, not once a turn. anywidget sends a widget's
// `_esm` and `_css` with each widget's state and imports the module anew for each.
//
// The page keeps the module and stylesheet of each version (KEY, a hash of their text) in a
// page-global map. The first view of a version on a page asks its kernel for them (a "module"
// message, answered with {key, module, css}), adds the stylesheet to the document's head and
// imports the module from a blob URL; every later view of that version uses what is there. A
// front-end that isolates each output (an iframe per output) has a fresh global for each: each
// view asks, as it would have received them with its state.
const KEY = "__ACPNB_KEY__";
const STORE = "__acpnbTurnView";
// How long a view waits for another view's request before it asks the kernel itself (that
// view's widget may have been closed before the answer came).
const PATIENCE = 15_000;

function request(model, signal) {
  return new Promise((resolve, reject) => {
    const done = (fn, value) => {
      model.off("msg:custom", heard);
      clearTimeout(timer);
      signal?.removeEventListener?.("abort", aborted);
      fn(value);
    };
    const heard = (msg) => {
      if (msg && msg.key === KEY && typeof msg.module === "string" && typeof msg.css === "string") done(resolve, msg);
    };
    const aborted = () => done(reject, new Error("the view was closed"));
    const timer = setTimeout(() => done(reject, new Error("the kernel did not send the view's module")), PATIENCE);
    model.on("msg:custom", heard);
    signal?.addEventListener?.("abort", aborted);
    model.send({ type: "module", key: KEY });
  });
}

async function install({ module, css }) {
  const style = document.createElement("style");
  style.id = `acpnb-turn-view-${KEY}`;
  style.textContent = css;
  document.head.append(style);
  const url = URL.createObjectURL(new Blob([module], { type: "text/javascript" }));
  try {
    const mod = await import(/* webpackIgnore: true */ url);
    return { view: mod.default, css };
  } finally {
    URL.revokeObjectURL(url);
  }
}

// The version's module, from the page or from the kernel through `model`; requests in flight are
// shared, and a failed one is forgotten so the next view asks again.
function load(model, signal) {
  const store = (globalThis[STORE] ??= new Map());
  let got = store.get(KEY);
  if (!got) {
    got = request(model, signal).then(install);
    store.set(KEY, got);
    got.catch(() => { if (store.get(KEY) === got) store.delete(KEY); });
  }
  return got;
}

async function render({ model, el, signal, ...rest }) {
  const wait = document.createElement("div");
  wait.className = "acpnb-tv-loading";
  wait.textContent = "loading the turn view…";
  el.append(wait);
  let got;
  for (let tries = 0; !got; tries++) {
    try {
      got = await load(model, signal);
    } catch (error) {
      if (signal?.aborted || tries >= 2) {
        wait.textContent = `The turn view could not load: ${error.message}.`;
        return undefined;
      }
    }
  }
  wait.remove();
  return got.view.render({ model, el, signal, ...rest, css: got.css });
}

export default { render };
