/**
 * acp_notebook's JupyterLab extension: the notebook side of the agent's cell tools.
 *
 * For each notebook, it opens one comm (target `acp_notebook.notebook`) with the notebook's
 * kernel; the kernel's tools (acp_notebook/notebook/notebook_edit.py) send requests over it and
 * this side answers each with a reply of the same number:
 *   - `cells`: the live cells (ids, types, sources, short outputs, execution counts), unsaved
 *     edits included;
 *   - `insert`: a new cell below another, one step of the notebook's undo;
 *   - `get`: one cell, its whole source (to show in a card before an edit or a run);
 *   - `edit`: a cell's new source, if it still holds the source the person was shown and is
 *     not running; one step of undo, the cell highlighted for a moment;
 *   - `run`: execute a cell as the person would (outputs, execution count, the kernel busy),
 *     if it still holds the source the person was shown;
 *   - `delete`: remove a cell (`%agent revert` of a cell the agent inserted), if it still holds
 *     the source the agent left in it (unless forced) and is not running; one step of undo.
 * The kernel asks only after the person allowed the operation (its card and permission): this
 * side applies what it is sent, to this notebook only, since the comm goes to its own kernel.
 * Everything sent back is bounded here, and masked and bounded again in the kernel.
 *
 * In the page, without the kernel (`pageActions`): a click on a cell link of the record
 * (`a.acpnb-cell[data-cell]`, render/cards.py) scrolls its notebook to that cell, and a code
 * block's "insert below" button of an answer, or a prompt suggestion, clicked
 * (widgets/static/turn_view.js sends the event `acpnb-insert-cell`) inserts the block or the
 * `%%agent` cell as a new cell below the cell whose output holds the button (the agent's, the
 * chat's), after those inserted so before: the person asked, no card. `data-acpnb-notebook` on
 * the page's body tells the turn view the extension is there to do it (without it there is no
 * code block's button, and the view puts a suggestion's cell in itself).
 *
 * Its second plugin (status.ts) keeps the kernel's status busy while a cell runs. It also shows
 * the turn views' notices in JupyterLab's notifications (notify.ts).
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ISessionContext } from '@jupyterlab/apputils';
import { ICodeCellModel } from '@jupyterlab/cells';
import {
  INotebookTracker,
  NotebookActions,
  NotebookPanel
} from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';

import { listenForNotices } from './notify';
import { statusPlugin } from './status';

const TARGET = 'acp_notebook.notebook';
const VERSION = 1;
/** Characters of a cell's source, and of one output's text, sent to the kernel. */
const SOURCE_CHARS = 20000;
const OUTPUT_CHARS = 2000;
const OUTPUTS_PER_CELL = 6;
/** Cells one `cells` reply holds at most. */
const MAX_CELLS = 100;

type Json = { [key: string]: any };

/** The comm of one notebook's session, reopened when its kernel changes or restarts. */
class Link {
  private comm: Kernel.IComm | null = null;
  private kernel: Kernel.IKernelConnection | null = null;

  constructor(private panel: NotebookPanel) {
    const session = panel.sessionContext;
    session.kernelChanged.connect(() => this.open());
    session.statusChanged.connect((_, status) => {
      if (status === 'restarting' || status === 'autorestarting') {
        this.comm = null; // the kernel's side is gone with it
      } else if (status === 'idle' && this.comm === null) {
        this.open();
      }
    });
    void session.ready.then(() => this.open());
  }

  private open(): void {
    const kernel = this.panel.sessionContext.session?.kernel ?? null;
    if (kernel === null || this.panel.isDisposed) {
      return;
    }
    if (this.comm !== null && this.kernel === kernel && !this.comm.isDisposed) {
      return;
    }
    if (!kernel.hasComm) {
      return;
    }
    this.kernel = kernel;
    const comm = kernel.createComm(TARGET);
    this.comm = comm;
    // Not returned: the kernel connection handles its messages one after another, each after
    // the promise of the one before, so a run awaited here would wait for its own reply.
    comm.onMsg = msg => {
      void this.handle(comm, msg);
    };
    comm.onClose = () => {
      // The kernel has no such target (acp_notebook not loaded in it) or went away.
      if (this.comm === comm) {
        this.comm = null;
      }
    };
    try {
      comm.open({ version: VERSION });
    } catch (error) {
      this.comm = null;
    }
  }

  private async handle(
    comm: Kernel.IComm,
    msg: KernelMessage.ICommMsgMsg
  ): Promise<void> {
    const data = msg.content.data as Json;
    const request = data.request;
    if (typeof request !== 'number') {
      return;
    }
    let reply: Json;
    try {
      reply = await this.apply(data);
    } catch (error) {
      reply = { ok: false, error: String(error).slice(0, 500) };
    }
    if (!comm.isDisposed) {
      comm.send({ reply: request, ...reply });
    }
  }

  private async apply(data: Json): Promise<Json> {
    switch (data.op) {
      case 'cells':
        return this.cells(data);
      case 'insert':
        return this.insert(data);
      case 'get':
        return this.get(data);
      case 'edit':
        return this.edit(data);
      case 'run':
        return this.run(data);
      case 'delete':
        return this.delete(data);
      default:
        return { ok: false, error: `unknown operation ${String(data.op)}` };
    }
  }

  private get notebook() {
    return this.panel.content;
  }

  /** The index of the cell `id` names (a cell id, or a 1-based index as `cells` gives). */
  private indexOf(id: unknown): number {
    const cells = this.notebook.model?.cells;
    if (!cells) {
      return -1;
    }
    if (typeof id === 'number' && Number.isInteger(id)) {
      return id >= 1 && id <= cells.length ? id - 1 : -1;
    }
    for (let i = 0; i < cells.length; i++) {
      if (cells.get(i).id === id) {
        return i;
      }
    }
    return -1;
  }

  private cells(data: Json): Json {
    const cells = this.notebook.model?.cells;
    if (!cells) {
      return { ok: false, error: 'the notebook has no model' };
    }
    const count = Math.max(1, Math.min(Number(data.count) || 10, MAX_CELLS));
    let end = data.end == null ? -1 : this.indexOf(data.end);
    if (end < 0) {
      end = cells.length - 1;
    }
    const out: Json[] = [];
    for (let i = Math.max(0, end - count + 1); i <= end; i++) {
      out.push(describe(cells.get(i), i + 1));
    }
    return { ok: true, cells: out, total: cells.length };
  }

  private insert(data: Json): Json {
    const model = this.notebook.model;
    if (!model) {
      return { ok: false, error: 'the notebook has no model' };
    }
    const after = this.indexOf(data.after);
    if (after < 0) {
      return { ok: false, error: 'no such cell in the notebook' };
    }
    const type = data.cell_type === 'markdown' ? 'markdown' : 'code';
    const source = String(data.source ?? '');
    let id = '';
    // One transaction: one step of the notebook's undo.
    model.sharedModel.transact(() => {
      id = model.sharedModel.insertCell(after + 1, {
        cell_type: type,
        source
      }).id;
    });
    return { ok: true, id, index: after + 2 };
  }

  private get(data: Json): Json {
    const index = this.indexOf(data.cell);
    if (index < 0) {
      return { ok: false, error: 'no such cell in the notebook' };
    }
    const model = this.notebook.widgets[index].model;
    return { ok: true, cell: describe(model, index + 1), running: running(model) };
  }

  private edit(data: Json): Json {
    const index = this.indexOf(data.cell);
    const model = this.notebook.model;
    if (index < 0 || !model) {
      return { ok: false, error: 'no such cell in the notebook' };
    }
    const widget = this.notebook.widgets[index];
    const cell = widget.model;
    if (running(cell)) {
      return { ok: false, error: 'the cell is running: it is not edited' };
    }
    if (cell.sharedModel.getSource() !== data.expected) {
      return { ok: false, error: 'the cell was changed since it was shown: not edited' };
    }
    // The cell's own transaction (setSource makes one): its undo tracks the cell's changes
    // only (a notebook transaction would not be undone there). Its own step, not merged with
    // what the person typed just before.
    const undo = (cell.sharedModel as any).undoManager;
    undo?.stopCapturing();
    cell.sharedModel.setSource(String(data.source ?? ''));
    undo?.stopCapturing();
    // Shown for a moment, so the person sees where the edit landed.
    widget.node.classList.add('acpnb-edited');
    widget.node.scrollIntoView({ block: 'nearest' });
    setTimeout(() => widget.node.classList.remove('acpnb-edited'), 2000);
    return { ok: true, cell: describe(cell, index + 1) };
  }

  private delete(data: Json): Json {
    const index = this.indexOf(data.cell);
    const model = this.notebook.model;
    if (index < 0 || !model) {
      return { ok: false, error: 'no such cell in the notebook' };
    }
    const cell = model.cells.get(index);
    if (running(cell)) {
      return { ok: false, error: 'the cell is running: it is not removed' };
    }
    if (data.force !== true && cell.sharedModel.getSource() !== data.expected) {
      return { ok: false, error: 'the cell was changed since: not removed' };
    }
    model.sharedModel.transact(() => model.sharedModel.deleteCell(index));
    return { ok: true };
  }

  private async run(data: Json): Promise<Json> {
    const index = this.indexOf(data.cell);
    if (index < 0) {
      return { ok: false, error: 'no such cell in the notebook' };
    }
    const cell = this.notebook.widgets[index];
    if (cell.model.type !== 'code') {
      return { ok: false, error: 'not a code cell' };
    }
    if (
      typeof data.expected === 'string' &&
      cell.model.sharedModel.getSource() !== data.expected
    ) {
      return { ok: false, error: 'the cell was changed since it was shown: not run' };
    }
    const context: ISessionContext = this.panel.sessionContext;
    if (data.wait === false) {
      // The kernel is busy with the asking turn's cell: queued behind it, not awaited.
      void NotebookActions.runCells(this.notebook, [cell], context);
      return { ok: true, queued: true };
    }
    const ran = await NotebookActions.runCells(this.notebook, [cell], context);
    const model = cell.model as ICodeCellModel;
    return {
      ok: true,
      ran,
      cell: describe(model, this.indexOf(model.id) + 1)
    };
  }
}

/** Whether a code cell runs now, or waits in the kernel's queue to run. */
function running(cell: any): boolean {
  const state = cell.type === 'code' ? (cell as ICodeCellModel).executionState : undefined;
  return state === 'running';
}

/** One cell as the kernel is told it: bounded. */
function describe(cell: any, index: number): Json {
  const source: string = cell.sharedModel.getSource();
  const described: Json = {
    id: cell.id,
    index,
    cell_type: cell.type,
    source: source.slice(0, SOURCE_CHARS),
    truncated: source.length > SOURCE_CHARS
  };
  if (cell.type === 'code') {
    const code = cell as ICodeCellModel;
    described.execution_count = code.executionCount ?? null;
    const outputs: Json[] = [];
    for (let i = 0; i < code.outputs.length; i++) {
      if (i === OUTPUTS_PER_CELL) {
        outputs.push({ output_type: 'more', count: code.outputs.length - i });
        break;
      }
      outputs.push(output(code.outputs.get(i).toJSON() as Json));
    }
    described.outputs = outputs;
  }
  return described;
}

/** An output in nbformat's shape, its texts cut, other data named only. */
function output(raw: Json): Json {
  const text = (value: unknown): string =>
    (Array.isArray(value) ? value.join('') : String(value ?? '')).slice(
      0,
      OUTPUT_CHARS
    );
  switch (raw.output_type) {
    case 'stream':
      return { output_type: 'stream', name: raw.name, text: text(raw.text) };
    case 'error':
      return {
        output_type: 'error',
        ename: text(raw.ename),
        evalue: text(raw.evalue)
      };
    default: {
      const data: Json = {};
      for (const key of Object.keys(raw.data ?? {})) {
        data[key.slice(0, 100)] = key === 'text/plain' ? text(raw.data[key]) : '';
      }
      return { output_type: String(raw.output_type), data };
    }
  }
}

/** Characters of a code block the "insert below" button inserts (an answer's block is shorter). */
const INSERT_CHARS = 100000;

/** The panel and cell index whose node holds `node`, else null. */
function cellOf(
  tracker: INotebookTracker,
  node: Node
): { panel: NotebookPanel; index: number } | null {
  const panel = tracker.find(p => p.node.contains(node));
  if (!panel) {
    return null;
  }
  const index = panel.content.widgets.findIndex(w => w.node.contains(node));
  return index < 0 ? null : { panel, index };
}

/** What the page does for the record and the turn view, without the kernel. */
function pageActions(tracker: INotebookTracker): void {
  document.body.dataset.acpnbNotebook = '1';
  // The cells the turn views' buttons (a code block's "insert below", a prompt suggestion)
  // inserted below each cell (by its id: their ids). A new one goes after the run of those
  // directly below the cell, so clicks land in click order, top to bottom. The run ends at the
  // first cell that is not one of them (one the person put or moved there, or none left): a new
  // cell never goes past a cell the person placed, and one moved away is out of the run. The
  // same rule as the turn view's own, without this extension (widgets/static/turn_view.js).
  const insertedBelow = new Map<string, Set<string>>();
  document.addEventListener('click', event => {
    const target = event.target as Element | null;
    const link = target?.closest?.('a.acpnb-cell[data-cell]') as HTMLElement | null;
    if (!link) {
      return;
    }
    event.preventDefault();
    const panel = tracker.find(p => p.node.contains(link)) ?? tracker.currentWidget;
    const id = link.dataset.cell;
    if (!panel || !id) {
      return;
    }
    const index = panel.content.widgets.findIndex(w => w.model.id === id);
    if (index < 0) {
      link.title = 'This cell is no longer in the notebook';
      return;
    }
    panel.content.activeCellIndex = index;
    void panel.content.scrollToItem(index, 'center');
  });
  document.addEventListener('acpnb-insert-cell', event => {
    const detail = (event as CustomEvent).detail;
    const target = event.target as Node | null;
    const where = target ? cellOf(tracker, target) : null;
    const model = where?.panel.content.model;
    if (!where || !model || typeof detail?.source !== 'string') {
      return;
    }
    const below = model.cells.get(where.index).id;
    const mine = insertedBelow.get(below) ?? new Set<string>();
    let at = where.index + 1;
    while (at < model.cells.length && mine.has(model.cells.get(at).id)) {
      at++;
    }
    let id = '';
    model.sharedModel.transact(() => {
      id = model.sharedModel.insertCell(at, {
        cell_type: 'code',
        source: detail.source.slice(0, INSERT_CHARS)
      }).id;
    });
    insertedBelow.set(below, mine.add(id));
    (event as CustomEvent).detail.inserted = id;
  });
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'acp-notebook:plugin',
  description:
    "The notebook side of acp_notebook's cell tools: an agent's accepted cells land in the notebook of its kernel.",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    // One comm per session: two views of one notebook share it, and must not both insert.
    const linked = new WeakSet<ISessionContext>();
    const link = (panel: NotebookPanel) => {
      if (!linked.has(panel.sessionContext)) {
        linked.add(panel.sessionContext);
        new Link(panel);
      }
    };
    tracker.forEach(link);
    tracker.widgetAdded.connect((_, panel) => link(panel));
    pageActions(tracker);
    // The turn views' notices (a long turn ended, a decision waits) as notifications.
    listenForNotices(app, tracker);
  }
};

export default [plugin, statusPlugin];
