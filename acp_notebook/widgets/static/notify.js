// Part of the turn view's module (widgets/turn_view.py puts it before turn_view.js).
//
// Issue 23, item 9: a turn that ends after running 10 s or more, or that starts waiting for the
// person (a permission, a question), says so when they cannot see its view: the page hidden,
// or the view out of sight (scrolled away, in a tab not shown). It says so in JupyterLab's
// notifications (the acp-notebook extension, labextension/src/notify.ts, shows each NOTIFY event
// of the window, with a button to the cell), and in the browser's when the page is hidden and
// the person allowed this site to notify. Our own words only: nothing of the agent's.
const NOTIFY = "acp-notebook:notify";
const LONG_TURN = 10; // seconds
const RUNNING = new Set(["starting", "waiting", "streaming", "asking", "stopping"]);
const ENDED = {
  done: ["success", "is done"],
  failed: ["error", "failed"],
  cancelled: ["info", "was stopped"],
};

function aboutSeconds(s) {
  return s < 60 ? `${Math.round(s)} s` : `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

// Whether `el` is out of the person's sight now: not drawn (a tab not shown, a cell windowed
// out), outside the window, or outside an ancestor that clips it (the notebook's scrolled
// panel). Read when it matters, from the layout as it is: an IntersectionObserver's word comes
// a frame late, after a scroll that just happened.
function outOfSight(el) {
  const r = el.getBoundingClientRect();
  const outside = (b) => r.bottom <= b.top || r.top >= b.bottom || r.right <= b.left || r.left >= b.right;
  if (!r.width && !r.height) return true;
  if (outside({ top: 0, left: 0, bottom: window.innerHeight, right: window.innerWidth })) return true;
  for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
    const style = getComputedStyle(p);
    if (/(auto|scroll|hidden|clip)/.test(`${style.overflowX} ${style.overflowY}`) && outside(p.getBoundingClientRect())) return true;
  }
  return false;
}

// `attention({ el, model })`: call `update(before, now, head, seconds)` after each of the
// view's messages (its state before and now, the kernel's head, how long the turn ran).
function attention({ el, model }) {
  let asking = "";

  function away() {
    return document.visibilityState === "hidden" || outOfSight(el);
  }

  // `turn`: the turn's id, on its view and on the record that replaces it (data-turn-id).
  function tell(kind, message, id, turn) {
    const path = String(model.widget_manager?.context?.path || "");
    const detail = { kind, message, path, id, turn, element: el };
    window.dispatchEvent(new CustomEvent(NOTIFY, { detail }));
    const Note = window.Notification;
    if (document.visibilityState === "hidden" && Note?.permission === "granted") {
      try {
        new Note(message, { body: path.split("/").pop() || "", tag: id });
      } catch (_e) { /* a browser that allows notifications only from a service worker */ }
    }
  }

  function update(before, now, head, seconds) {
    const turn = String(head.turn || "");
    if (asking && now !== "asking") {
      // Decided (here or elsewhere): the notification that asked goes.
      window.dispatchEvent(new CustomEvent(NOTIFY, { detail: { dismiss: asking } }));
      asking = "";
    }
    if (before === now) return;
    if (now === "asking" && away()) {
      const question = (head.forms || []).length && !(head.pending || []).length;
      asking = `${turn}:asking:${Date.now()}`;
      tell("warning", question ? "The agent asks you a question" : "The agent waits for your decision", asking, turn);
    } else if (ENDED[now] && RUNNING.has(before) && seconds >= LONG_TURN && away()) {
      const [kind, words] = ENDED[now];
      tell(kind, `The agent's turn ${words} after ${aboutSeconds(seconds)}`, `${turn}:${now}`, turn);
    }
  }

  return { update };
}
