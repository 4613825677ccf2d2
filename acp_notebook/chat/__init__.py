"""The chat widget (`%agent chat`): a conversation with a session, its turns live, its record kept.

- `widget.py`: `ChatWidget`, the chat itself: the log, sending, Stop, the queue, following the
  session's other turns.
- `input.py`: the input box (an anywidget) and the `/` and `@` completions it offers.
- `pickers.py`: the mode and config menus, following the session.
- `turns.py`: a turn in the chat's log, live (a `widgets/turn_view.py` view), and the turns the
  session had before the chat opened.
- `record.py`: the static record that follows the chat's output, and keeping it turn by turn.

A folder of the widgets tier (`tests/test_layers.py`), beside `widgets/`, whose views it uses.
"""
