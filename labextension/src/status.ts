/**
 * The kernel's status as JupyterLab and Notebook 7 show it: busy from a cell's start to its end.
 *
 * The page takes the last status the kernel publishes as the kernel's, whatever request it
 * answers, except for requests of the types listed in the page's `untracked_message_types`
 * (jupyter_server's list, given to the page by jupyterlab_server: kernel_info, debug,
 * interrupt, ...). A cell that awaits an agent's turn sees other requests meanwhile, each
 * answered with its own busy and idle, and each of those idles showed the kernel idle for the
 * rest of the turn (issue 23, item 2, measured in JupyterLab 4.6):
 *   - the page's own subshell requests, on the control channel: it makes a subshell for the
 *     widgets' messages at the first widget message of a kernel, and deletes one when its last
 *     comm closes;
 *   - the widgets' messages themselves (comm_open, comm_msg, comm_close): a click on Stop or on
 *     a permission button, the live view's requests (answered with their own busy and idle:
 *     acp_notebook/notebook/kernel_status.py).
 * Neither says whether the kernel runs code, so both join the untracked list; the cell's own
 * busy and idle still drive the status, and every request still gets its idle (the page's
 * futures end on it: the list only keeps the status bar and `kernel.status` from following it).
 *
 * What it changes beyond agent cells: a widget callback that runs long shows the kernel idle
 * (JupyterLab sends widget messages over subshells, where they run beside the cells anyway).
 */
import { PageConfig } from '@jupyterlab/coreutils';
import { JupyterFrontEndPlugin } from '@jupyterlab/application';

const OPTION = 'untracked_message_types';

/** Requests whose busy and idle say nothing of whether the kernel runs a cell. */
export const NOT_STATUS = [
  'create_subshell_request',
  'delete_subshell_request',
  'list_subshell_request',
  'comm_open',
  'comm_msg',
  'comm_close'
];

/** Adds `types` to the page's untracked message types (kept, if the server gave some). */
export function untrack(types: string[]): void {
  let current: string[] = [];
  try {
    const given = JSON.parse(PageConfig.getOption(OPTION) || '[]');
    if (Array.isArray(given)) {
      current = given.filter(t => typeof t === 'string');
    }
  } catch {
    // not a list: ours alone
  }
  PageConfig.setOption(OPTION, JSON.stringify([...new Set([...current, ...types])]));
}

/** No requirements: it runs in every JupyterLab and Notebook 7 page, before a kernel talks. */
export const statusPlugin: JupyterFrontEndPlugin<void> = {
  id: 'acp-notebook:kernel-status',
  description:
    "Keeps the kernel's status busy while a cell runs: widget messages and subshell requests do not set it.",
  autoStart: true,
  activate: () => untrack(NOT_STATUS)
};
