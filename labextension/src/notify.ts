/**
 * The turn view's notices in JupyterLab's notifications (issue 23, item 9).
 *
 * The turn view (acp_notebook/widgets/static/notify.js) cannot reach JupyterLab's modules: it is
 * an anywidget module, loaded on its own. When a turn ends after 10 s or more, or starts waiting
 * for the person, while its view is out of their sight, it dispatches an `acp-notebook:notify`
 * event on the window; this shows it as a notification, with a button that goes to the cell,
 * and dismisses a "waiting" one once the turn no longer waits. The words are the view's own
 * (never the agent's), shown as text, and bounded here.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Notification } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

export const NOTIFY = 'acp-notebook:notify';
const KINDS = new Set(['info', 'success', 'warning', 'error']);
/** How long a notice stays, in ms; one that waits for the person stays until it is answered. */
const SHOWN = 10000;

type Detail = { [key: string]: unknown };

/** Shows the views' notices; returns what stops listening. */
export function listenForNotices(
  app: JupyterFrontEnd,
  tracker: INotebookTracker
): () => void {
  // Notice ids (the view's) -> JupyterLab's: a view drawn twice (two views of one notebook)
  // tells once, and a waiting notice is dismissed by its id.
  const shown = new Map<string, string>();
  const listener = (event: Event) => {
    const detail = ((event as CustomEvent).detail ?? {}) as Detail;
    if (typeof detail.dismiss === 'string') {
      const id = shown.get(detail.dismiss);
      if (id) {
        Notification.dismiss(id);
      }
      return;
    }
    const id = String(detail.id ?? '').slice(0, 200);
    const message = String(detail.message ?? '').slice(0, 200);
    if (!message || shown.has(id)) {
      return;
    }
    const path = String(detail.path ?? '');
    const panel = tracker.find(p => p.context.path === path) ?? null;
    const name = path.split('/').pop() ?? '';
    const kind = KINDS.has(String(detail.kind)) ? String(detail.kind) : 'info';
    const waits = kind === 'warning';
    const actions = panel
      ? [
          {
            label: 'Show',
            caption: 'Go to the cell of this turn',
            callback: () => show(app, panel, detail)
          }
        ]
      : [];
    const text = name ? `${message} (${name})` : message;
    shown.set(
      id,
      Notification.emit(text, kind as Notification.TypeOptions, {
        autoClose: waits ? false : SHOWN,
        actions
      })
    );
    if (shown.size > 200) {
      shown.delete(shown.keys().next().value as string);
    }
  };
  window.addEventListener(NOTIFY, listener);
  return () => window.removeEventListener(NOTIFY, listener);
}

/** The notebook in front, scrolled to the turn's view, or to the record that replaced it. */
function show(app: JupyterFrontEnd, panel: NotebookPanel, detail: Detail): void {
  app.shell.activateById(panel.id);
  const element = detail.element;
  const turn = String(detail.turn ?? '');
  let target: Element | null =
    element instanceof Element && element.isConnected ? element : null;
  if (target === null && turn) {
    target = panel.node.querySelector(
      `.acpnb-turn[data-turn-id="${CSS.escape(turn)}"]`
    );
  }
  target?.scrollIntoView({ block: 'center' });
}
