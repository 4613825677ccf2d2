"""The requests the client serves for the agent: `requests.py` answers each (file system,
terminals, permissions, elicitation); `workspace.py`, `safe_fs.py` and `regular_file.py` are the
file system, `checkpoints.py` and `checkpoint_files.py` what a turn wrote, `terminal.py` and
`supervisor.py` the terminals, `permissions.py` and `elicit.py` the questions to the person.
"""
