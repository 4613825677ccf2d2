// Shared by the page's modules (turn_view.js, chat_input.js): the Python side puts this file
// before each module's own text (`_esm`), as anywidget loads one module per widget.

// The text of `el` with a line end at each block's edge, as a reader would copy it: not
// textContent, which runs the paragraphs and items of the renderer's lean markup together
// (no newline between its tags), nor innerText, which depends on layout (empty when hidden).
// A loop, not recursion: markup nested however deep cannot exhaust the stack.
const BLOCK = /^(p|div|li|ul|ol|pre|table|tr|h[1-6]|blockquote|details|summary|hr|footer)$/;
function plainText(el) {
  let out = "";
  const todo = [el];
  while (todo.length) {
    const n = todo.pop();
    if (n === "\n") { if (out && !out.endsWith("\n")) out += "\n"; continue; }
    if (n === "\t") { out += "\t"; continue; }
    if (n.nodeType === Node.TEXT_NODE) { out += n.data; continue; }
    if (n.nodeType !== Node.ELEMENT_NODE) continue;
    const name = n.localName;
    if (name === "br") { out += "\n"; continue; }
    const edge = n !== el && BLOCK.test(name) ? "\n" : name === "td" || name === "th" ? "\t" : null;
    if (edge) todo.push(edge);
    for (let c = n.lastChild; c; c = c.previousSibling) todo.push(c);
    if (edge === "\n") todo.push(edge);
  }
  return out.replace(/\t\n/g, "\n").replace(/\n{3,}/g, "\n\n");
}
