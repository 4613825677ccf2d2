"""Keep secrets out of what is shown and saved: API keys in the agent's environment.

An agent may echo its environment (a terminal running `env`, a stack trace on stderr). Values of
variables whose names look secret are replaced before text reaches a cell, a saved notebook, a
transcript or an error message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION_ID", re.I)
MIN_SECRET_LENGTH = 8  # shorter values ("1", "true") would blank out ordinary text
MASK = "[redacted]"


def secret_values(env: Mapping[str, str | None]) -> set[str]:
    return {v for k, v in env.items()
            if v and SECRET_NAME.search(k) and len(v) >= MIN_SECRET_LENGTH}


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: list[str] = []
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        merged = set(self._secrets) | {s for s in secrets if len(s) >= MIN_SECRET_LENGTH}
        # Longest first, so a secret containing another is masked whole.
        self._secrets = sorted(merged, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value

    def obj(self, value: Any) -> Any:
        """A copy of a JSON-like value with every string redacted (unchanged parts shared)."""
        if not self._secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.obj(v)
                    for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.obj(v) for v in value]
        return value
