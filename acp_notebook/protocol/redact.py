"""Keep secrets out of what is shown and saved: API keys in the environment and the agent's.

An agent may echo its environment (a terminal running `env`, a stack trace on stderr, a hostile
agent on purpose). Values of variables whose names look secret are replaced before text reaches a
cell, a saved notebook, a transcript, a widget or an error message.

What is masked, for each secret value of at least `MIN_SECRET_LENGTH` characters:

- the value itself, and any run of at least `prefix_length(len)` characters that equals its start
  (a truncated echo such as the first 20 characters is a leak too); a run from its middle or its
  end, from a few points inside it on (`_windows`: a key cut in two parts);
- the value as the page or a file may spell it: each punctuation or non-ASCII character may be
  percent-encoded (`%2F`, `+` for a space), JSON-escaped (`\\/`, `\\u00e9`), an HTML entity
  (`&amp;`, `&#47;`) or Markdown-escaped (`\\-`), in any mix;
- its base64 (standard and URL-safe alphabets, at the three alignments it can have inside a
  longer base64 text, as in `Basic dXNlcjprZXk=`).

With `live=True` (a turn still streaming), a text that ends with the start of a secret (at least
`HOLD_MIN` characters of it) loses that end until the next redraw: the next chunk may complete
the key, and a prefix shown now would stay in the live view. The final record masks the joined
text of each part, so a key split across chunks is one key again there. In a transcript (`obj`),
only text that grows by streaming is held back (`GROWING`): an id, a kind or a status that lost
its end would name another part, or nothing.

The secret set is re-read from the environment at each call (`os.environ` as it is now: a cell may
have run `load_dotenv()` since the kernel started). Re-reading costs one pass over the variables'
names; the pattern, one compiled `re` alternation, is rebuilt only when the set grows. Masking
looks for each pattern branch's anchor (a few letters or digits of it) with `str.find`, and runs
the pattern only around what it finds: linear in the text's length, about 10 ms a megabyte here
with two keys whether or not one is in it; a text that grew from one masked lately (a streaming
answer at each redraw) is searched only where it grew (`AnchorHits`). Secrets are never
forgotten: a key removed from the environment may still be known to an agent started before.

A hostile agent that knows a key can always spell it in some other way (reversed, in pieces
shorter than the prefix length): masking stops echoes and the usual encodings, not an agent that
means to exfiltrate; the key must not be given to an agent that should not have it.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# AUTH but not AUTHOR: GIT_AUTHOR_NAME would blank the user's name in every answer.
SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASS|CREDENTIAL|AUTH(?!OR)|COOKIE|SESSION_ID"
    r"|PRIVATE|_PAT$",
    re.I,
)
MIN_SECRET_LENGTH = 8  # shorter values ("1", "true") would blank out ordinary text
MASK = "[redacted]"
_TWO_MASKS = MASK * 2
# A prefix this long is masked. Public key prefixes ("sk-ant-api03-", 13 characters; "github_pat_",
# 11) carry no secret and appear in ordinary text (documentation, error messages): 16 characters
# of a real key include at least a few of its random ones. A shorter secret is masked from two
# thirds of its length on, never below MIN_SECRET_LENGTH (8 characters of an ordinary word would
# be blanked everywhere: "password" is 8).
PREFIX_LENGTH = 16
# A value longer than this is masked by its first MAX_SECRET_LENGTH characters (a whole
# credentials file in a variable would otherwise make a pattern of hundreds of thousands).
MAX_SECRET_LENGTH = 8192
_PIECE = 64  # forms longer than two pieces are masked piece by piece (see _pieces)
_SMALL_TEXT = 4096  # shorter texts are masked in one pass, longer ones around their anchors
_STEP, _WINDOWS = 8, 4  # where a run from inside a secret is masked from (see _windows)
# The transcript's keys whose text grows while a turn streams (a message's text, the joined
# thoughts, a terminal's output, a diff's new text) and those under which all of it may grow (a
# tool's raw input and output): `obj(..., live=True)` holds back the end of these strings only.
GROWING = frozenset({"text", "thoughts", "output", "newText"})
GROWING_BELOW = frozenset({"rawInput", "rawOutput"})
HOLD_MIN = 4  # the shortest start of a key a live text holds back
# Longest spelling of one character by the encodings above ("&#x0000e9;" is 10): the end of a
# live text searched for the start of a secret is PREFIX_LENGTH of them.
_MAX_UNIT = 12


def secret_values(env: Mapping[str, str | None]) -> set[str]:
    return {v for k, v in env.items() if v and SECRET_NAME.search(k) and maskable(v)}


def maskable(value: str) -> bool:
    """Long enough, and not a filler that ordinary text is full of: eight spaces (an empty
    secret padded), "00000000", "********" (a placeholder)."""
    return len(value) >= MIN_SECRET_LENGTH and len(set(value)) >= 3 and not value.isspace()


_OPTION = re.compile(r"--?([\w.-]+)(?:=(.*))?", re.S)
_PATH_OPTION = re.compile(r"FILE|PATH|DIR", re.I)


def secret_args(argv: Sequence[str]) -> set[str]:
    """Values of secret-looking options in an agent's command line (`--api-key VALUE`,
    `--token=VALUE`): `%agent list` shows the command, and the agent may echo it."""
    found: set[str] = set()
    for option, following in zip(argv, [*argv[1:], ""], strict=True):
        match = _OPTION.fullmatch(option)
        if (
            match is None or not SECRET_NAME.search(match[1]) or _PATH_OPTION.search(match[1])
        ):  # --key-file PATH: a path is no secret
            continue
        value = match[2] if match[2] is not None else following
        if maskable(value) and not value.startswith("-"):
            found.add(value)
    return found


class _EnvironScan:
    """The secret values of a live environment, read cheaply enough to do at every output.

    Only the values of secret-looking names are read: reading `os.environ.items()` decodes every
    value (about 380 us for 36 variables here), the names alone with a cache of which look
    secret about 15 us.
    """

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self._secret_name: dict[str, bool] = {}

    def values(self) -> list[str]:
        looks = self._secret_name
        if len(looks) > 4096:  # names come and go (a loop setting variables): stay bounded
            looks.clear()
        out = []
        for name in self.environ:
            secret = looks.get(name)
            if secret is None:
                secret = looks[name] = bool(SECRET_NAME.search(name))
            if secret:
                value = self.environ.get(name)
                if value and maskable(value):
                    out.append(value)
        return out


def prefix_length(length: int) -> int:
    """How many leading characters of a secret of `length` characters are masked as a leak."""
    two_thirds = -(-2 * length // 3)
    return min(length, max(MIN_SECRET_LENGTH, min(PREFIX_LENGTH, two_thirds)))


class Redactor:
    """Masks known secrets; `environ` (e.g. `os.environ`) is re-read at every call."""

    def __init__(
        self, secrets: Iterable[str] = (), *, environ: Mapping[str, str] | None = None
    ) -> None:
        self._secrets: set[str] = set()
        self._environ = _EnvironScan(environ) if environ is not None else None
        self._pattern: re.Pattern[str] | None = None
        self._tail: re.Pattern[str] | None = None
        self._window = PREFIX_LENGTH * _MAX_UNIT
        self._before = self._after = 0
        self._last: tuple[str, bool, str] = ("", False, "")  # the last long text masked
        self._hits: AnchorHits | None = None  # the anchors, and where they are in long texts
        self.add(secrets)

    @property
    def secrets(self) -> frozenset[str]:
        return frozenset(self._secrets)

    def add(self, secrets: Iterable[str]) -> None:
        new = {s for s in secrets if maskable(s)}
        if new <= self._secrets:
            return
        new -= self._secrets
        if new:
            self._secrets |= new
            self._compile()

    def clear(self) -> None:
        """Forget every secret, as a new redactor knows none (the environment's are read again
        at the next call): a kernel reused for another run masks that run's secrets, not these."""
        self._secrets = set()
        self._pattern = self._tail = None
        self._before = self._after = 0
        self._last = ("", False, "")
        self._hits = None

    def refresh(self) -> None:
        """Pick up secrets added to the environment since the last call."""
        if self._environ is not None:
            self.add(self._environ.values())

    def __bool__(self) -> bool:
        self.refresh()
        return bool(self._secrets)

    def text(self, value: str, *, live: bool = False) -> str:
        self.refresh()
        return self._text(value, live)

    def obj(self, value: Any, *, live: bool = False) -> Any:
        """A copy of a JSON-like value with every string redacted (unchanged parts shared).

        With `live`, a bare string, a string under a `GROWING` key and any string below a
        `GROWING_BELOW` key hold back a trailing start of a secret (see the module docstring);
        the other strings of a dict (ids, kinds, statuses, titles) are masked but kept whole."""
        self.refresh()
        if self._pattern is None:
            return value
        return self._obj(value, live, growing=True, below=False)

    def settle(self, text: str) -> tuple[str, str]:
        """For a text that keeps growing (a streaming answer, fed piece by piece): `(masked,
        rest)`, where `masked` is the start of `text` that nothing appended later can change,
        masked, and `rest` the raw end to settle again with what comes next.

        So a live view masks each piece of a long answer once, not the whole answer at every
        redraw, and a key split across chunks is still one key: a match reads at most
        `_after` characters, so one that starts that far from the end is complete, and the cut
        is moved back to the start of a match that runs across it (that match is found whole
        in `rest` next time). Masking what was settled so far and then `rest` gives what
        masking the whole text would, but that two masks meeting at the cut stay two."""
        self.refresh()
        pattern = self._pattern
        if pattern is None:
            return text, ""
        cut = len(text) - self._after
        if cut <= 0:
            return "", text
        hits = self._hits
        if hits is None or len(text) <= _SMALL_TEXT:
            regions = [(0, len(text))]
        else:
            regions = self._regions(text, hits)
        cut = self._before_match(text, cut, pattern, regions)
        return self._text(text[:cut], False), text[cut:]

    @staticmethod
    def _before_match(
        text: str, cut: int, pattern: re.Pattern[str], regions: list[tuple[int, int]]
    ) -> int:
        """`cut`, or the start of the first match that runs across it."""
        for start, end in regions:
            if start >= cut:
                break
            for match in pattern.finditer(text, start, end):
                if match.start() >= cut:
                    break
                if match.end() > cut:
                    return match.start()
        return cut

    def _obj(self, value: Any, live: bool, *, growing: bool, below: bool) -> Any:
        if isinstance(value, str):
            return self._text(value, live and growing)
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                under = below or k in GROWING_BELOW
                key = self._text(k, False) if isinstance(k, str) else k
                out[key] = self._obj(v, live, growing=under or k in GROWING, below=under)
            return out
        if isinstance(value, list | tuple):
            return [self._obj(v, live, growing=growing, below=below) for v in value]
        return value

    def _text(self, value: str, live: bool) -> str:
        if self._pattern is None:
            return value
        if len(value) > _SMALL_TEXT:
            # A transcript holds its answer twice (the message part and "text"): mask it once.
            last_in, last_live, last_out = self._last
            if live == last_live and value == last_in:
                return last_out
            masked = self._text_uncached(value, live)
            self._last = (value, live, masked)
            return masked
        return self._text_uncached(value, live)

    def _text_uncached(self, value: str, live: bool) -> str:
        assert self._pattern is not None
        value = self._mask(value, self._pattern)
        if live and self._tail is not None:
            start = max(0, len(value) - self._window)
            match = self._tail.search(value, start)
            if match is not None:
                value = value[: match.start()]
        return value

    def _mask(self, value: str, pattern: re.Pattern[str]) -> str:
        # Each masked run holds its secret's anchor (a few plain characters of its start): a text
        # with none of them, nearly every text, is left without running the pattern, and in a
        # long one the pattern runs only around them (a turn that echoed a key once would
        # otherwise run it over its whole text at every redraw: 44 ms a megabyte).
        hits = self._hits
        if hits is None or len(value) <= _SMALL_TEXT:
            if hits is not None and not any(a in value for a in hits.anchors):
                return value
            value, count = pattern.subn(MASK, value)
        else:
            out: list[str] = []
            done = count = 0
            for start, end in self._regions(value, hits):
                masked, found = pattern.subn(MASK, value[start:end])
                out += [value[done:start], masked]
                done, count = end, count + found
            if not count:
                return value
            value = "".join([*out, value[done:]])
        while count > 1 and _TWO_MASKS in value:  # a long key masked piece by piece: one mask
            value = value.replace(_TWO_MASKS, MASK)  # (str.replace: a regex took 83 ms a MB)
        return value

    def _regions(self, value: str, hits: AnchorHits) -> list[tuple[int, int]]:
        """Where a match may be: around each anchor, as far as the longest spelling reaches."""
        regions: list[tuple[int, int]] = []
        for at in hits.find(value):
            start, end = max(0, at - self._before), at + self._after
            if regions and start <= regions[-1][1]:
                regions[-1] = (regions[-1][0], max(regions[-1][1], end))
            else:
                regions.append((start, end))
        return regions

    def _compile(self) -> None:
        # (what to match, how many of its first characters make a leak)
        starts = {(f, prefix_length(len(f))) for s in self._secrets for f in _forms(s)}
        starts |= {w for s in self._secrets for w in _windows(s)}
        ordered = sorted(starts, key=lambda start: len(start[0]), reverse=True)
        self._hits = None  # meanwhile every text runs the pattern: no new key slips through
        self._last = ("", False, "")
        # Longest first: at one position the first branch that matches wins, so a secret that
        # contains another is masked whole.
        self._pattern = re.compile("|".join(_prefix_pattern(f, n) for f, n in ordered))
        # A held-back end shorter than the masked prefix length: longer ones are masked anyway.
        # At least HOLD_MIN characters of it: any text ends in the first character of some
        # key (with a random token in the environment, one answer in ten would show its last
        # character only once the turn ended), and three show nothing of a key.
        forms = {f for s in self._secrets for f in _forms(s)}
        held = [f[: prefix_length(len(f)) - 1] for f in forms]
        self._tail = re.compile(
            "(?:" + "|".join(_prefix_pattern(h, min(HOLD_MIN, len(h))) for h in held if h) + r")\Z"
        )
        # A match starts at most n spelled characters before its anchor, and is at most its
        # form spelled long.
        self._before = max(n for _, n in ordered) * _MAX_UNIT
        self._after = max(len(f) for f, _ in ordered) * _MAX_UNIT
        anchors = [_anchor(f[:n]) for f, n in ordered]
        self._hits = None if "" in anchors else AnchorHits(tuple(set(anchors)))


def _anchor(start: str) -> str:
    """The longest run of letters and digits in `start` (they have no other spelling), or ""
    when it is too short to filter texts with."""
    run = max(re.findall(r"[A-Za-z0-9]+", start), key=len, default="")
    return run if len(run) >= 3 else ""


def _forms(secret: str) -> list[str]:
    """The secret and its base64 spellings (each character's escapes are in `_unit`), a long
    one in pieces."""
    secret = secret[:MAX_SECRET_LENGTH]
    forms = [secret]
    data = secret.encode()
    for pad in range(3 if len(secret) <= _PIECE * 4 else 0):
        # The characters of base64(pad + data) that depend on the secret's bytes alone.
        first, end = -(-8 * pad // 6), 8 * (pad + len(data)) // 6
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            core = encode(b"\0" * pad + data).decode()[first:end]
            if len(core) >= MIN_SECRET_LENGTH:
                forms.append(core)
    return [piece for form in forms for piece in _pieces(form)]


def _windows(secret: str) -> list[tuple[str, int]]:
    """The secret from a few points inside it on, and from its last prefix-length characters:
    a run from its middle or its end (a key cut in two parts, "...the rest: <last 20>") is
    masked but for the characters before the next point. At most `_WINDOWS` points a piece,
    at least `_STEP` apart: each costs a scan of every text for its anchor."""
    out = []
    for piece in _pieces(secret[:MAX_SECRET_LENGTH]):
        least = prefix_length(len(piece))
        last = len(piece) - least
        if last <= 0:
            continue
        step = max(_STEP, -(-last // _WINDOWS))
        for at in sorted({*range(step, last, step), last}):
            # From there or a little further, where its first characters hold an anchor.
            found = next(
                (a for a in range(at, min(at + step, last + 1)) if _anchor(piece[a : a + least])),
                None,
            )
            if found is not None:
                out.append((piece[found:], least))
    return out


def _pieces(form: str) -> list[str]:
    """A long form as consecutive pieces, each masked on its own: one pattern per character of
    a 2,000-character private key would nest too deep for `re`. Any run of the form longer than
    two pieces holds a whole one; the last piece is never shorter than the first."""
    if len(form) <= 2 * _PIECE:
        return [form]
    cuts = list(range(0, len(form) - _PIECE, _PIECE))
    return [form[a:b] for a, b in zip(cuts, [*cuts[1:], len(form)], strict=True)]


def _prefix_pattern(form: str, least: int) -> str:
    """A regex for any start of `form` at least `least` characters long, as long as it goes."""
    units = [_unit(c) for c in form]
    rest = ""
    for unit in reversed(units[least:]):
        rest = f"(?:{unit}{rest})?"
    return "".join(units[:least]) + rest


_NAMED = {"&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "apos"}


def _unit(char: str) -> str:
    """A regex for one character of a secret, however an encoder may have spelled it."""
    if char.isascii() and char.isalnum():
        return char
    code = ord(char)
    spellings = [
        re.escape(char),
        f"&#0*{code};",
        f"&#[xX]0*{_hex(f'{code:x}')};",
        "".join(f"%{_hex(f'{b:02x}')}" for b in char.encode()),
    ]
    if code <= 0xFFFF:
        spellings.append(r"\\u" + _hex(f"{code:04x}"))
    if char in _NAMED:
        spellings.append(f"&{_NAMED[char]};")
    if char.isascii():
        spellings.append(r"\\" + re.escape(char))  # Markdown or JSON escape: \- \/ \"
    if char == " ":
        spellings.append(r"\+")
    if char in "\n\r\t":  # JSON's short escapes (a PEM key has newlines)
        spellings.append(re.escape(json.dumps(char)[1:-1]))
    return "(?:" + "|".join(spellings) + ")"


def _hex(digits: str) -> str:
    """Hex digits in either case: `2f` matches `2F` (cheaper to compile than a (?i:) group)."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in digits)


# -- where the anchors occur in a long text, searched only where it grew ------------------------
#
# A live view masks the transcript of a streaming turn at every redraw, and its answer is the text
# of the redraw before with more at the end. Finding each anchor (`str.find` over the whole text,
# once per anchor) made every redraw cost the length of the answer times the number of anchors:
# 4 MB took 7 to 15 ms per key in the environment, at up to 25 redraws a second. The positions
# found in a text stay right for any text that starts with it: only the end, from the last
# `len(anchor) - 1` characters of the old text on, is searched again. The result is the same list
# of positions as a search of the whole text (tests/unit/test_redact.py compares them).

#: Texts remembered with their positions: a transcript grows in a few places at once (the
#: answer, the thoughts, a terminal's output), and each is looked up among these.
SEEN = 4


class AnchorHits:
    """The positions of `anchors` in texts, remembering the last `SEEN` texts searched."""

    def __init__(self, anchors: tuple[str, ...]) -> None:
        self.anchors = anchors
        # (text, sorted positions of every anchor in it); replaced whole, never mutated, so a
        # call from another thread (a log record masked there) sees a consistent list.
        self._seen: list[tuple[str, list[int]]] = []

    def find(self, value: str) -> list[int]:
        """Every position where an anchor starts in `value` (sorted; one per anchor found)."""
        seen = self._seen
        base: tuple[str, list[int]] | None = None
        for entry in seen:
            if len(entry[0]) <= len(value) and value.startswith(entry[0]):
                base = entry
                break
        start, hits = (len(base[0]), list(base[1])) if base is not None else (0, [])
        for anchor in self.anchors:
            # A hit of the old text ends in it; a new one ends past it, so starts at most
            # len(anchor) - 1 characters before its end.
            at = value.find(anchor, max(0, start - len(anchor) + 1))
            while at != -1:
                hits.append(at)
                at = value.find(anchor, at + 1)
        hits.sort()
        self._seen = [(value, hits), *(e for e in seen if e is not base)][:SEEN]
        return hits
