"""The redactor on its own: what it masks, what it leaves, and that it stays linear."""

from __future__ import annotations

import base64
import html
import json
import random
import re
import string
import time
import urllib.parse
from collections.abc import Callable

import pytest

from acp_notebook.protocol.redact import (
    HOLD_MIN,
    MASK,
    AnchorHits,
    Redactor,
    prefix_length,
    secret_args,
    secret_values,
)

KEY = "sk-live-Ab3/xY9+zQ7=mN2_pL8-kR4.tW6~vB1c"


#: The key as the masking must find it: whole, percent-encoded, in base64, its first 20 and its
#: last 16 characters.
SPELLED = [
    KEY,
    urllib.parse.quote(KEY, safe=""),
    base64.b64encode(KEY.encode()).decode(),
    KEY[:20],
    KEY[-16:],
]


def leaks(text: str, key: str = KEY) -> bool:
    """Whether `text` holds the key, any 10 characters of it, or a usual spelling of it."""
    spellings = [
        key,
        urllib.parse.quote(key, safe=""),
        urllib.parse.quote_plus(key),
        json.dumps(key)[1:-1],
        html.escape(key),
        base64.b64encode(key.encode()).decode(),
    ]
    return any(s[i : i + 10] in text for s in spellings for i in range(len(s) - 9))


@pytest.mark.parametrize(
    "shown",
    [
        KEY,
        f"export MY_API_KEY={KEY}; echo done",
        urllib.parse.quote(KEY, safe=""),
        urllib.parse.quote(KEY),  # "/" kept
        urllib.parse.quote_plus(KEY),
        re.sub("%..", lambda m: m[0].lower(), urllib.parse.quote(KEY, safe="")),  # %2f
        json.dumps(KEY).replace("/", "\\/"),  # JSON as some encoders write "/"
        json.dumps({"k": KEY}),
        html.escape(KEY),
        KEY.replace("/", "&#47;").replace("+", "&#x2B;"),
        KEY.replace("-", "\\-").replace("_", "\\_").replace(".", "\\."),  # Markdown-escaped
        base64.b64encode(KEY.encode()).decode(),
        base64.urlsafe_b64encode(KEY.encode()).decode(),
    ],
    ids=[
        "raw",
        "in-text",
        "percent",
        "percent-path",
        "plus",
        "percent-lower",
        "json",
        "json-obj",
        "html",
        "entities",
        "markdown",
        "base64",
        "base64url",
    ],
)
def test_the_key_and_its_usual_spellings_are_masked(shown: str) -> None:
    masked = Redactor([KEY]).text(shown)
    assert MASK in masked
    assert not leaks(masked), masked


@pytest.mark.parametrize("user", ["u", "us", "user:"])
def test_a_key_inside_a_longer_base64_text_is_masked_at_any_alignment(user: str) -> None:
    header = "Authorization: Basic " + base64.b64encode(f"{user}:{KEY}".encode()).decode()
    masked = Redactor([KEY]).text(header)
    assert MASK in masked
    # What is left of the encoded key is at most the characters that share bits with the
    # neighbours: a few, never a run of 10 of the key's own encoding.
    core = base64.b64encode(KEY.encode()).decode()
    assert not any(core[i : i + 10] in masked for i in range(len(core) - 9))


def test_a_long_prefix_of_the_key_is_masked_a_short_one_is_not() -> None:
    redactor = Redactor([KEY])
    n = prefix_length(len(KEY))
    assert n == 16  # a 40-character key: 16 characters of it are a leak
    assert redactor.text(f"key {KEY[:20]}...") == f"key {MASK}..."
    assert redactor.text(f"key {KEY[:n]}!") == f"key {MASK}!"
    # The public start of a key ("sk-live-") is ordinary text: left alone.
    assert redactor.text(f"keys look like {KEY[:8]}…") == f"keys look like {KEY[:8]}…"
    assert redactor.text(f"almost {KEY[: n - 1]} here") == f"almost {KEY[: n - 1]} here"


def test_prefix_length_rule() -> None:
    # Whole secrets of 8 characters only; two thirds of a short one; 16 of a long one.
    assert [prefix_length(n) for n in (8, 9, 12, 18, 24, 40, 200)] == [8, 8, 8, 12, 16, 16, 16]


def test_a_live_text_ending_in_the_start_of_a_key_holds_it_back() -> None:
    redactor = Redactor([KEY])
    # A chunk ended in the middle of the key: the live view shows nothing of it yet.
    for cut in range(HOLD_MIN, len(KEY)):
        shown = redactor.text(f"the key is {KEY[:cut]}", live=True)
        assert shown in {"the key is ", f"the key is {MASK}"}, (cut, shown)
    # Fewer characters than HOLD_MIN are ordinary text: every text ends in some key's first one.
    for cut in range(1, HOLD_MIN):
        assert redactor.text(f"the key is {KEY[:cut]}", live=True) == f"the key is {KEY[:cut]}"
    assert redactor.text(f"url {urllib.parse.quote(KEY, safe='')[:14]}", live=True) == "url "
    # Not live (a finished turn), or not at the end: a short prefix is ordinary text.
    assert redactor.text(f"the key is {KEY[:5]}") == f"the key is {KEY[:5]}"
    assert redactor.text(f"{KEY[:5]} and more", live=True) == f"{KEY[:5]} and more"


def test_a_live_transcript_holds_back_only_text_that_grows() -> None:
    """The start of a key held back from an id, a kind or a status would rename the part (the
    page could no longer put a permission's buttons in its card)."""
    redactor = Redactor([KEY])
    c = KEY[:HOLD_MIN]
    transcript = {
        "turnId": f"turn-{c}",
        "text": f"the key is {c}",
        "thoughts": f"about {c}",
        "parts": [
            {"type": "message", "id": f"m{c}", "role": "agent", "text": f"answer {c}"},
            {
                "type": "tool_call",
                "id": f"t{c}",
                "toolCallId": f"call-{c}",
                "title": f"Read {c}",
                "kind": f"rea{c}",
                "status": f"complete{c}",
                "content": [
                    {"type": "content", "content": {"type": "text", "text": f"out {c}"}},
                    {"type": "diff", "path": f"/w/{c}", "oldText": f"a{c}", "newText": f"b {c}"},
                ],
                "rawInput": {"command": f"echo {c}", "args": [f"x {c}"]},
            },
            {"type": "plan", "id": f"p{c}", "entries": [{"content": f"step {c}"}]},
        ],
        "terminals": [{"terminalId": f"term-{c}", "command": f"ls {c}", "output": f"ls {c}"}],
    }
    live = redactor.obj(transcript, live=True)
    message, call, plan = live["parts"]
    # What streams loses the end that may be a key's start...
    assert (live["text"], live["thoughts"], message["text"]) == ("the key is ", "about ", "answer ")
    assert call["content"][0]["content"]["text"] == "out "
    assert call["content"][1]["newText"] == "b "
    assert call["rawInput"] == {"command": "echo ", "args": ["x "]}
    assert live["terminals"][0]["output"] == "ls "
    # ...and nothing else does: every id, kind, status, title and path is whole.
    assert (message["id"], call["id"], plan["id"]) == (f"m{c}", f"t{c}", f"p{c}")
    assert (call["toolCallId"], call["kind"], call["status"]) == (
        f"call-{c}",
        f"rea{c}",
        f"complete{c}",
    )
    assert (call["title"], call["content"][1]["path"], plan["entries"][0]["content"]) == (
        f"Read {c}",
        f"/w/{c}",
        f"step {c}",
    )
    assert (live["turnId"], live["terminals"][0]["terminalId"]) == (f"turn-{c}", f"term-{c}")
    # A whole key is masked everywhere, live or not.
    assert redactor.obj({"id": KEY, "kind": f"x{KEY}"}, live=True) == {
        "id": MASK,
        "kind": f"x{MASK}",
    }
    # A bare string is text that grows.
    assert redactor.obj(f"so {c}", live=True) == "so "


def test_a_key_split_across_chunks_is_masked_once_joined() -> None:
    redactor = Redactor([KEY])
    chunks = ["the key is ", KEY[:7], KEY[7:23], KEY[23:], " ok"]
    assert redactor.text("".join(chunks)) == f"the key is {MASK} ok"
    transcript = {"parts": [{"type": "message", "text": "".join(chunks)}], "text": "".join(chunks)}
    masked = redactor.obj(transcript)
    assert masked["parts"][0]["text"] == masked["text"] == f"the key is {MASK} ok"


def test_secrets_put_in_the_environment_later_are_masked() -> None:
    environ: dict[str, str] = {"HOME": "/home/someone"}
    redactor = Redactor(environ=environ)
    assert redactor.text(f"echo {KEY}") == f"echo {KEY}"
    environ["OPENAI_API_KEY"] = KEY  # load_dotenv() in a cell
    assert redactor.text(f"echo {KEY}") == f"echo {MASK}"
    assert redactor.obj({"a": [f"x{KEY}"]}) == {"a": [f"x{MASK}"]}
    del environ["OPENAI_API_KEY"]  # an agent started meanwhile may still know it
    assert redactor.text(KEY) == MASK


def test_short_values_and_innocent_names_are_not_secrets() -> None:
    env = {
        "API_KEY": "1",
        "DEBUG_TOKEN": "true",
        "PATH": "/usr/local/bin:/usr/bin",
        "HOME": "/home/someone",
        "DB_PASSWORD": "hunter2!",
        "HF_TOKEN": "hf_" + "q" * 30,
        "GITHUB_PAT": "github_pat_" + "z" * 30,
        "GIT_AUTHOR_NAME": "Ada Lovelace",
        "EMPTY_TOKEN": " " * 12,
        "PLACEHOLDER_KEY": "*" * 12,
        "ZERO_SECRET": "00000000",
    }
    assert secret_values(env) == {"hunter2!", "hf_" + "q" * 30, "github_pat_" + "z" * 30}
    redactor = Redactor(secret_values(env))
    text = "PATH is /usr/local/bin, API_KEY=1, the password is short: hunter2."
    assert redactor.text(text) == text
    assert redactor.text(text, live=True) == text
    assert not Redactor(environ={"PATH": "/usr/bin"})


def test_a_secret_inside_another_is_masked_whole() -> None:
    redactor = Redactor(["abcdefgh12", "zzabcdefgh12zz"])
    assert redactor.text("[zzabcdefgh12zz] [abcdefgh12]") == f"[{MASK}] [{MASK}]"


def test_masking_is_linear_and_cheap_when_nothing_matches() -> None:
    secrets = [
        KEY,
        "sk-ant-api03-" + "x7" * 45,
        "ghp_" + "Yq" * 18,
        "AKIAABCDEFGHIJKLMNOP",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ]
    redactor = Redactor(secrets)
    chunk = "ordinary text with sk and ghp and AKIA, numbers 1234 and a/b+c=d. "

    def cost(n: int, with_key: bool) -> float:
        text = chunk * n + (KEY if with_key else "")
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            redactor.text(text, live=True)
            best = min(best, time.perf_counter() - started)
        return best

    for with_key in (False, True):
        small, large = cost(2_000, with_key), cost(16_000, with_key)
        # 8 times the text: well under 8 * 4 times the time (a quadratic mask would take 64).
        assert large < 32 * small + 0.01, (with_key, small, large)
    assert cost(16_000, False) < 0.25  # about 1 MB, nothing to mask
    # A key in a long text: the pattern runs around it, not over the whole text again.
    assert cost(16_000, True) < 3 * cost(16_000, False) + 0.01


def test_a_long_secret_is_masked_in_pieces_and_compiles() -> None:
    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits + "+/"
    lines = ["".join(rng.choice(alphabet) for _ in range(64)) for _ in range(40)]
    pem = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END PRIVATE KEY-----"
    redactor = Redactor([pem])
    assert redactor.text(f"key: {pem} end") == f"key: {MASK} end"
    assert redactor.text(json.dumps({"k": pem})) == json.dumps({"k": MASK})
    excerpt = pem[500:1500]  # any long run of it: whole pieces inside are masked
    masked = redactor.text(excerpt)
    assert MASK in masked and len(masked) < 200, masked


def test_secret_options_of_an_agent_command_are_secrets() -> None:
    argv = [
        "agent",
        "--api-key",
        "sk-abcdefgh1",
        "--token=tok-12345678",
        "--model",
        "large-model",
        "--password",
        "-x",
        "--key-file",
        "/home/u/.key.json",
        "--keep-alive",
        "yes-please",
    ]
    assert secret_args(argv) == {"sk-abcdefgh1", "tok-12345678"}


def test_a_run_from_the_middle_or_the_end_of_a_key_is_masked() -> None:
    redactor = Redactor([KEY])
    # The key cut in two parts around other text: the second part is masked too.
    masked = redactor.text(f"first {KEY[:20]}, then {KEY[20:]}.")
    assert KEY[:16] not in masked and KEY[24:] not in masked, masked
    # The last 16 characters alone, and a long run from the middle: at most a few characters
    # (up to the next point the pattern starts from) stay.
    assert redactor.text(f"ends with {KEY[-16:]}") == f"ends with {MASK}"
    middle = redactor.text(f"[{KEY[5:35]}]")
    assert MASK in middle and len(middle) <= len(MASK) + 2 + 7, middle


def test_a_long_text_is_masked_around_each_occurrence() -> None:
    redactor = Redactor([KEY])
    filler = "ordinary words, numbers 0123456789 and sk-live- prefixes. " * 2000
    spelled = SPELLED
    text = spelled[0] + filler + f" {spelled[1]} " + filler + f" {spelled[2]} {spelled[3]} "
    text += filler + spelled[4]
    masked = redactor.text(text)
    assert masked.count(MASK) == 5 and not leaks(masked), masked.count(MASK)
    assert masked.count(filler) == 3  # the rest intact


def test_anchor_hits_of_a_growing_text_are_those_of_a_whole_search() -> None:
    # Cut anywhere, an anchor among them: the positions are found whether it ends in the old
    # text, straddles the cut or starts after it, for several texts growing at once.
    rng = random.Random(5)
    anchors = ("abc", "bcab", "zz", "x")
    hits = AnchorHits(anchors)
    texts = ["", "", ""]
    for _ in range(400):
        i = rng.randrange(len(texts))
        texts[i] += "".join(rng.choice("abcxz.") for _ in range(rng.randint(0, 9)))
        if rng.random() < 0.05:
            texts[i] = texts[i][: rng.randint(0, len(texts[i]))]  # not grown: searched whole
        whole = sorted(m.start() for a in anchors for m in re.finditer(f"(?={a})", texts[i]))
        assert hits.find(texts[i]) == whole, texts[i]


def test_a_growing_text_is_masked_as_if_whole_at_every_redraw() -> None:
    other = "ghp_" + "Yq7" * 12
    spelled = [*SPELLED, other]
    pieces = ["ordinary words, sk-live- and ghp_ prefixes. " * 40, "\n", *spelled]
    rng = random.Random(9)
    for live in (False, True):
        redactor = Redactor([KEY, other])
        answer = thoughts = ""
        for _ in range(30):
            # Two texts growing at once, each redraw cutting the new text anywhere (a key
            # split across redraws, an anchor cut in two).
            add = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 4)))
            cut = rng.randint(0, len(add))
            answer, thoughts = answer + add[:cut], thoughts + add[cut:]
            for text in (answer, thoughts):
                fresh = Redactor([KEY, other]).text(text, live=live)
                assert redactor.text(text, live=live) == fresh
                assert KEY not in fresh and other not in fresh


def test_a_growing_text_costs_what_it_grew_not_its_length() -> None:
    redactor = Redactor([KEY, "ghp_" + "Yq7" * 12, "AKIAABCDEFGHIJKLMNOP"])
    text = "ordinary text with sk and ghp and AKIA, numbers 1234 and a/b+c=d. " * 30_000  # 2 MB

    def best(mask: Callable[[int], object]) -> float:
        times = []
        for i in range(5):
            started = time.perf_counter()
            mask(i)
            times.append(time.perf_counter() - started)
        return min(times)

    redactor.text(text, live=True)
    grown = best(lambda i: redactor.text(text + "more words " * (i + 1), live=True))
    whole = best(lambda i: redactor.text(f"{i} {text}", live=True))  # grown from no text seen
    # Searching 2 MB for 20-odd anchors against comparing it with the text before (a memcmp).
    assert grown < whole / 4, (grown, whole)
