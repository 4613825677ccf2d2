"""The turn view's stylesheets: every rule scoped under `.acpnb-turn`.

`CSS` is the live view's whole look (5 KB): the live turn view loads it as its widget's CSS
(anywidget puts it in the page's head, where it stays for every record on the page).
`RECORD_STYLE` (under 2 KB) is what a finished record carries, once per output, so a record reads
as cards wherever its HTML is shown with its styles: a notebook reopened in a fresh page,
`jupyter nbconvert --to html`, VS Code (issue 23, item 4). It is the cards, badges, diff lines,
alerts, footer and code boxes, with the same colours as `CSS`, which it never contradicts (both
are in the page after a live turn). Where styles are stripped (GitHub; JupyterLab's sanitizer
for an untrusted notebook drops `<style>` with its text) the markup still reads: statuses are
words and glyphs, cards are `<details>`, diff lines keep their `+`/`-`.

Both use JupyterLab's theme variables with fallbacks; the record's fallbacks follow the
reader's `prefers-color-scheme` where the page has no JupyterLab theme.
"""

from __future__ import annotations

import re


def _minified(rules: str) -> str:
    return "".join(
        (" " if line.startswith(" ") else "\n") + line.strip()
        for line in rules.strip().splitlines()
    )


_RULES = """
.acpnb-turn{font-family:var(--jp-content-font-family,system-ui,-apple-system,sans-serif);
 font-size:var(--jp-content-font-size1,14px);line-height:1.5;
 color:var(--jp-content-font-color1,inherit);max-width:100%}
.acpnb-turn .acpnb-answer>:first-child{margin-top:0}
.acpnb-turn .acpnb-answer>:last-child{margin-bottom:.4em}
/* :not(#_) outranks JupyterLab's `.jp-ThemedContainer .jp-RenderedHTMLCommon pre`, which
   clears the background, padding and margin of every <pre> in an HTML output. */
div.acpnb-turn:not(#_) pre code{background:transparent}
div.acpnb-turn:not(#_) pre{background:var(--jp-layout-color2,rgba(127,127,127,.1));
 color:var(--jp-content-font-color1,inherit);padding:6px 8px;margin:.5em 0;border-radius:4px;
 overflow:auto;max-height:32em;font-family:var(--jp-code-font-family,ui-monospace,monospace);
 font-size:var(--jp-code-font-size,12px);line-height:1.4;white-space:pre}
.acpnb-turn pre.acpnb-out,.acpnb-turn .acpnb-tool>pre:not(.acpnb-diff,.acpnb-term){
 white-space:pre-wrap;word-break:break-word}
/* The client's own card (a kernel tool's run): its code whole, nothing scrolled out of sight. */
div.acpnb-turn:not(#_) .acpnb-own pre{white-space:pre-wrap;overflow-wrap:anywhere;max-height:none}
.acpnb-turn code{font-family:var(--jp-code-font-family,ui-monospace,monospace);font-size:.92em}
.acpnb-turn table{border-collapse:collapse;margin:4px 0}
.acpnb-turn th,.acpnb-turn td{border:1px solid var(--jp-border-color2,rgba(127,127,127,.35));
 padding:2px 8px}
.acpnb-turn details>summary{cursor:pointer}
.acpnb-turn .acpnb-muted{color:var(--jp-ui-font-color2,rgba(127,127,127,.95))}
.acpnb-turn .acpnb-thought{margin:4px 0;color:var(--jp-ui-font-color2,inherit)}
.acpnb-turn .acpnb-thought>summary>span{color:var(--jp-ui-font-color2,rgba(127,127,127,.95))}
.acpnb-turn .acpnb-thought>div{border-left:3px solid var(--jp-border-color2,rgba(127,127,127,.4));
 padding-left:8px;font-style:italic}
.acpnb-turn .acpnb-user{border-left:3px solid var(--jp-brand-color2,rgba(33,150,243,.6));
 padding-left:8px;margin:6px 0}
.acpnb-turn .acpnb-subagent{border:1px solid var(--jp-border-color2,rgba(127,127,127,.35));
 border-left:3px solid var(--jp-brand-color2,rgba(33,150,243,.6));border-radius:6px;
 padding:4px 10px;margin:6px 0}
.acpnb-turn .acpnb-subturn{padding-left:6px}
.acpnb-turn .acpnb-compaction{margin:6px 0;color:var(--jp-ui-font-color2,inherit)}
.acpnb-turn .acpnb-suggestion{display:inline-block;white-space:pre-wrap;cursor:pointer;
 border:1px solid var(--jp-border-color2,rgba(127,127,127,.4));border-radius:12px;
 padding:1px 9px;margin:2px 4px 2px 0}
.acpnb-turn .acpnb-suggestion:hover{border-color:var(--jp-brand-color1,#1976d2)}
.acpnb-turn .acpnb-plan{border:1px solid var(--jp-border-color2,rgba(127,127,127,.35));
 border-radius:6px;padding:4px 10px;margin:6px 0}
.acpnb-turn .acpnb-plan ul{list-style:none;padding-left:4px;margin:2px 0}
.acpnb-turn .acpnb-plan li{margin:1px 0}
.acpnb-turn .acpnb-plan .acpnb-completed{color:var(--jp-ui-font-color2,inherit);
 text-decoration:line-through}
.acpnb-turn .acpnb-plan .acpnb-in_progress{font-weight:600}
.acpnb-turn .acpnb-plan li>small{display:inline-block;font-size:.8em;border-radius:8px;
 padding:0 6px;margin-left:6px; border:1px solid rgba(127,127,127,.45);
 color:var(--jp-ui-font-color2,inherit)}
.acpnb-turn .acpnb-plan .acpnb-prio-high{border-color:rgba(229,57,53,.6);
 color:var(--jp-error-color1,#c62828)}
.acpnb-turn .acpnb-tool,.acpnb-turn .acpnb-perm,.acpnb-turn .acpnb-raw{
 border:1px solid var(--jp-border-color2,rgba(127,127,127,.35));border-radius:6px;
 margin:6px 0;padding:3px 10px;background:var(--jp-layout-color1,transparent)}
.acpnb-turn .acpnb-tool>summary,.acpnb-turn .acpnb-raw>summary{padding:2px 0}
.acpnb-turn .acpnb-tool[open]>summary{border-bottom:1px solid
 var(--jp-border-color3,rgba(127,127,127,.2));margin-bottom:4px}
/* A card's kind icon, diff counts and status badge, styled by place; the classes after them
   (acpnb-kind, acpnb-badge, acpnb-footer, acpnb-meter) are the markup of records saved before. */
.acpnb-turn .acpnb-tool>summary>i,.acpnb-turn .acpnb-kind{display:inline-block;width:1.5em;
 text-align:center;font-style:normal}
.acpnb-turn .acpnb-tool>summary>span:not([class]){
 color:var(--jp-ui-font-color2,rgba(127,127,127,.95))}
.acpnb-turn .acpnb-tool>summary>b,.acpnb-turn .acpnb-badge{font-size:.8em;border-radius:9px;
 padding:0 7px;margin-left:6px;border:1px solid currentColor;white-space:nowrap;
 vertical-align:1px;font-weight:inherit}
.acpnb-turn .acpnb-tool>summary>b:not([class]),.acpnb-turn .acpnb-st-completed{
 color:var(--jp-success-color1,#2e7d32)}
.acpnb-turn .acpnb-st-failed{color:var(--jp-error-color1,#c62828)}
.acpnb-turn .acpnb-st-cancelled,.acpnb-turn .acpnb-st-rejected{
 color:var(--jp-ui-font-color2,#757575)}
.acpnb-turn .acpnb-st-pending,.acpnb-turn .acpnb-st-in_progress{
 color:var(--jp-brand-color1,#1976d2)}
.acpnb-turn .acpnb-locs{font-size:.85em;margin:2px 0}
.acpnb-turn .acpnb-note{font-size:.85em;font-style:italic;color:var(--jp-ui-font-color2,inherit)}
.acpnb-turn .acpnb-diff span{display:inline-block;min-width:100%}
.acpnb-turn .acpnb-add{background:rgba(46,160,67,.2)}
.acpnb-turn .acpnb-del{background:rgba(248,81,73,.2)}
.acpnb-turn .acpnb-hunk{color:var(--jp-brand-color1,#1976d2)}
.acpnb-turn .acpnb-file{font-weight:600}
.acpnb-turn .acpnb-perm ul{margin:2px 0;padding-left:20px}
.acpnb-turn .acpnb-chosen{font-weight:600}
.acpnb-turn .acpnb-alert{border-left:4px solid var(--jp-error-color1,#c62828);
 background:rgba(229,57,53,.1);padding:6px 10px;margin:6px 0;border-radius:0 4px 4px 0}
.acpnb-turn .acpnb-warning{border-left-color:var(--jp-warn-color1,#ef6c00);
 background:rgba(255,152,0,.1)}
.acpnb-turn .acpnb-info{border-left-color:var(--jp-ui-font-color2,#757575);
 background:rgba(127,127,127,.1)}
.acpnb-turn footer,.acpnb-turn .acpnb-footer{font-size:.85em;
 color:var(--jp-ui-font-color2,inherit);
 border-top:1px solid var(--jp-border-color3,rgba(127,127,127,.25));margin-top:6px;padding-top:3px}
.acpnb-turn footer>b{font-weight:bold}
/* The context meter: a track and its fill, blue, orange past its `high` mark (80%). */
.acpnb-turn footer>meter,.acpnb-turn .acpnb-meter{appearance:none;display:inline-block;
 width:60px;height:6px;border-radius:3px;background:var(--jp-layout-color3,rgba(127,127,127,.3));
 vertical-align:middle;overflow:hidden;margin:0 4px;border:0}
.acpnb-turn .acpnb-meter>span{display:block;height:100%;background:var(--jp-brand-color1,#1976d2)}
.acpnb-turn .acpnb-meter.acpnb-high>span{background:var(--jp-warn-color1,#ef6c00)}
.acpnb-turn footer>meter::-webkit-meter-bar{background:transparent;border:0;border-radius:0;
 height:6px}
.acpnb-turn footer>meter::-webkit-meter-optimum-value{height:6px;
 background:var(--jp-brand-color1,#1976d2)}
.acpnb-turn footer>meter::-webkit-meter-suboptimum-value{height:6px;
 background:var(--jp-warn-color1,#ef6c00)}
.acpnb-turn footer>meter::-moz-meter-bar{background:var(--jp-brand-color1,#1976d2)}
.acpnb-turn footer>meter:-moz-meter-sub-optimum::-moz-meter-bar{
 background:var(--jp-warn-color1,#ef6c00)}
.acpnb-turn .acpnb-running{color:var(--jp-brand-color1,#1976d2);font-weight:600;
 animation:acpnb-pulse 1.4s ease-in-out infinite}
@keyframes acpnb-pulse{50%{opacity:.4}}
"""

#: The rules alone (the live turn view loads them as its own stylesheet).
CSS = _minified(_RULES)

#: The record's rules. Colours are custom properties set once on the root: JupyterLab's theme
#: variable when the page has one (light or dark theme), else a fallback for light, or for dark
#: under `prefers-color-scheme: dark`.
_RECORD_RULES = """
.acpnb-turn{--ao:var(--jp-success-color1,#2e7d32);--ax:var(--jp-error-color1,#c62828);
 --am:var(--jp-ui-font-color2,#6b6b6b);--ab:var(--jp-brand-color1,#1976d2);
 --ad:var(--jp-border-color2,rgba(127,127,127,.4));--ag:rgba(127,127,127,.1)}
@media(prefers-color-scheme:dark){.acpnb-turn{--ao:var(--jp-success-color1,#66bb6a);
 --ax:var(--jp-error-color1,#ef5350);--am:var(--jp-ui-font-color2,#a8a8a8);
 --ab:var(--jp-brand-color1,#64b5f6)}}
.acpnb-turn :is(.acpnb-tool,.acpnb-perm,.acpnb-raw,.acpnb-plan){border:1px solid var(--ad);
 border-radius:6px;margin:6px 0;padding:3px 10px}
div.acpnb-turn:not(#_) pre{background:var(--jp-layout-color2,var(--ag));padding:6px 8px;
 overflow:auto;max-height:32em}
.acpnb-turn .acpnb-tool>summary>b{font-size:.8em;border-radius:9px;padding:0 7px;
 margin-left:6px;border:1px solid;font-weight:inherit}
.acpnb-turn .acpnb-tool>summary>b:not([class]){color:var(--ao)}
.acpnb-turn .acpnb-st-failed{color:var(--ax)}
.acpnb-turn :is(.acpnb-st-cancelled,.acpnb-st-rejected,.acpnb-muted,.acpnb-note,footer,
 .acpnb-tool>summary>span:not([class])){color:var(--am)}
.acpnb-turn :is(.acpnb-st-pending,.acpnb-st-in_progress,.acpnb-hunk){color:var(--ab)}
.acpnb-turn :is(.acpnb-thought>div,.acpnb-user){border-left:3px solid var(--ad);
 padding-left:8px}
.acpnb-turn .acpnb-diff span{display:inline-block;min-width:100%}
.acpnb-turn .acpnb-add{background:rgba(46,160,67,.22)}
.acpnb-turn .acpnb-del{background:rgba(248,81,73,.22)}
.acpnb-turn .acpnb-alert{border-left:4px solid var(--ax);background:rgba(229,57,53,.1);
 padding:6px 10px;margin:6px 0}
.acpnb-turn .acpnb-warning{border-left-color:var(--jp-warn-color1,#ef6c00)}
.acpnb-turn .acpnb-info{border-left-color:var(--am);background:var(--ag)}
.acpnb-turn footer{border-top:1px solid var(--ad);margin-top:6px;padding-top:3px;
 font-size:.85em}
.acpnb-turn .acpnb-suggestion{display:inline-block;border:1px solid var(--ad);
 border-radius:12px;padding:1px 9px;margin:2px 4px 2px 0;white-space:pre-wrap}
"""


#: What a finished record carries, once per output (see the module's docstring). On one line:
#: nbformat saves each line of an output as a JSON string of its own.
RECORD_CSS = re.sub(r"([;,{]) ", r"\1", _minified(_RECORD_RULES)).replace("\n", "")
RECORD_STYLE = f"<style>{RECORD_CSS}</style>"

#: The classes MathJax 3 and 2 skip: the turn's output is text, never math to typeset.
MATH_OFF = "mathjax_ignore tex2jax_ignore"
