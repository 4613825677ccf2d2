"""Pure ACP: JSON-RPC framing, the update fold, input parts, turn results. No I/O here.

Importing this package must not import anyio or IPython (a test checks it).
"""
