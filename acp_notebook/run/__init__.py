"""`acp-notebook run`: execute notebooks from the command line, showing each agent turn.

`cli` parses the command line, `execute` drives nbclient and watches the kernel's messages,
`printer` turns a turn's successive transcripts into terminal lines and adds up the turns
(pure), `console` writes them (colour, prefixes), `params` injects `-p NAME=VALUE`.
"""
