// The turn view's `_esm` (widgets/turn_view.py): a loader, so that the view's module and
// stylesheet (~48 KB) cross the wire once a page, not once a turn. anywidget sends a widget's
// `_esm` and `_css` with each widget's state and imports the module anew for each.
//
// The page keeps the module and stylesheet of each version (KEY, a hash of their text) in a
// page-global map. The first view of a version on a page asks its kernel for them (a "module"
// message, answered with {key, module, css}), adds the stylesheet to the document's head and
// imports the module from a blob URL; every later view of that version uses what is there. A
// front-end that isolates each output (an iframe per output) has a fresh global for each: each
// view asks, as it would have received them with its state. The page keeps one request in
// flight for all its views of a version.
const KEY = "__ACPNB_KEY__";
const STORE = "__acpnbTurnView";

// The kernel answers on its loop: a cell that holds it (a long computation) delays the answer,
// never loses it. So a request is not sent again while its view lives; when its view goes
// first (its turn ended), a view that was waiting on it asks itself.
function request(model, signal) {
  return new Promise((resolve, reject) => {
    const done = (fn, value) => {
      model.off("msg:custom", heard);
      signal?.removeEventListener?.("abort", aborted);
      fn(value);
    };
    const heard = (msg) => {
      if (msg && msg.key === KEY && typeof msg.module === "string" && typeof msg.css === "string") done(resolve, msg);
    };
    const aborted = () => done(reject, Object.assign(new Error("the view was closed"), { closed: true }));
    if (signal?.aborted) return aborted();
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
// shared, and a failed one is forgotten so the next view asks again. A view that waited 10 s on
// another view's request asks too: a front-end that does not say when a view goes (no
// `signal`) would leave it waiting on a view that is gone.
function load(model, signal) {
  const store = (globalThis[STORE] ??= new Map());
  let got = store.get(KEY);
  if (!got) {
    got = request(model, signal).then(install);
    got.then(() => { got.settled = true; }, () => { if (store.get(KEY) === got) store.delete(KEY); });
    store.set(KEY, got);
    return got;
  }
  if (got.settled || signal) return got;
  const late = new Promise((resolve) => setTimeout(resolve, 10_000));
  return Promise.race([got, late.then(() => got.settled ? got : request(model, signal).then(install))]);
}

async function render({ model, el, signal, ...rest }) {
  const wait = document.createElement("div");
  wait.className = "acpnb-tv-loading";
  wait.textContent = "loading the turn view…";
  el.append(wait);
  let got;
  while (!got) {
    try {
      got = await load(model, signal);
    } catch (error) {
      if (signal?.aborted) return undefined; // this view went: nothing to draw
      if (!error?.closed) { // not another view's closing: the module would not load here
        wait.textContent = `The turn view could not load: ${error?.message || error}`;
        return undefined;
      }
    }
  }
  wait.remove();
  return got.view.render({ model, el, signal, ...rest, css: got.css });
}

export default { render };
