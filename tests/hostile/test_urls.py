"""Links from the agent, read as the browser reads them (issue 20, item 3): the host shown beside or
for a link is the host the browser opens, computed by a WHATWG parser (ada, the oracle here as
`new URL(href).host` is in tests/browser/test_lab_urls.py); a link with user info, or that browsers
and Python's `urlsplit` read differently, is never a link. Checked in the URL elicitation (its part,
the client, every view of the record, a headless run) and everywhere else an agent's URL becomes
a link: Markdown links and images in the answer, its Markdown record, resource links."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any

import ada_url
import pytest

from acp_notebook.client import auth
from acp_notebook.protocol.elicitation import ElicitationPart, read_request
from acp_notebook.protocol.turn import read_turn
from acp_notebook.render import mdsafe, render_html, render_markdown, render_text
from acp_notebook.render.agentmd import to_html
from acp_notebook.render.htmlbits import block
from acp_notebook.render.mdwrite import inline
from tests.agents.script import script
from tests.client_helpers import Agent, reports
from tests.nb_util import execute, scripted, text, transcripts
from tests.shared_kernel import SharedKernel

LONG = "https://login.example.com/" + "a" * 9000

#: (id, URL, the host the browser opens when the URL may be a link, else None: refused). The
#: host is what `new URL(href).host` gives: punycode for an internationalised name.
HOSTILE: list[tuple[str, str, str | None]] = [
    ("plain", "https://login.example.com/device?code=42", "login.example.com"),
    ("port", "https://login.example.com:8443/x", "login.example.com:8443"),
    ("default-port", "https://login.example.com:443/x", "login.example.com"),
    ("upper", "HTTPS://Login.EXAMPLE.com/", "login.example.com"),
    ("backslash-userinfo", "https://evil.example\\@accounts.google.com/", None),
    ("backslash-host", "https://evil.example\\accounts.google.com/", None),
    ("backslash-slashes", "https:\\\\evil.example/", None),
    ("tab-in-host", "https://accounts.goo\tgle.com/", "accounts.google.com"),
    ("newline-in-host", "https://accounts.google.com\n.evil.example/", "accounts.google.com.evil.example"),  # noqa: E501
    ("userinfo", "https://accounts.google.com@evil.example/", None),
    ("user-password", "https://accounts.google.com:443@evil.example/", None),
    ("empty-userinfo", "https://@evil.example/", None),
    ("percent-host", "https://%65vil.example/", None),
    ("percent-dot", "https://accounts.google.com%2eevil.example/", None),
    ("idn-homograph", "https://\u0430pple.com/login", "xn--pple-43d.com"),
    ("punycode-homograph", "https://xn--80ak6aa92e.com/", "xn--80ak6aa92e.com"),
    ("idn", "https://m\u00fcnchen.de/", "xn--mnchen-3ya.de"),
    ("fullwidth", "https://\uff45vil.example/", "evil.example"),
    ("ipv4-hex", "http://0x7f.1/", None),
    ("ipv4-octal", "http://0177.0.0.1/", None),
    ("ipv4-number", "http://2130706433/", None),
    ("javascript", "javascript:alert(1)", None),
    ("data", "data:text/html,<script>alert(1)</script>", None),
    ("scheme-relative", "//evil.example/", None),
    ("no-slashes", "https:evil.example/", None),
    ("long", LONG, None),
]  # fmt: skip
SHOWN = [(i, u, h) for i, u, h in HOSTILE if h is not None]
REFUSED = [(i, u, h) for i, u, h in HOSTILE if h is None]
ids = [i for i, _, _ in HOSTILE]


def browser_host(href: str) -> str:
    """What the browser's `new URL(href).host` is, by the same standard."""
    return str(ada_url.URL(href).host)


def link(url: str) -> dict[str, Any]:
    return {"message": "Sign in", "mode": "url", "url": url, "elicitationId": "el-1"}


def part_for(url: str) -> ElicitationPart | None:
    """The recorded part, or None when the request is refused to the agent as not a web URL."""
    try:
        return read_request(link(url), "e1")
    except Exception:
        return None


def views(part: ElicitationPart) -> tuple[str, str, str]:
    turn = read_turn({"turnId": "t", "parts": [part.to_json()], "success": True})
    return render_html(turn), render_markdown(turn), render_text(turn)


# -- the URL elicitation -------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "url", "host"), SHOWN, ids=[i for i, _, _ in SHOWN])
def test_a_link_is_shown_with_the_host_the_browser_opens(name: str, url: str, host: str) -> None:
    part = part_for(url)
    assert part is not None
    assert part.host == host
    html, _, plain = views(part)
    (href,) = re.findall(r"<code class=acpnb-href>([^<]*)</code>", html)
    (shown,) = re.findall(r"<code class=acpnb-host>([^<]*)</code>", html)
    assert browser_host(unescape(href)) == unescape(shown) == host
    assert "<a " not in html  # the record never follows a link
    assert f"(host {host})" in plain or "punycode " + host in plain
    assert "refused" not in plain


@pytest.mark.parametrize(("name", "url", "host"), REFUSED, ids=[i for i, _, _ in REFUSED])
def test_a_link_that_would_mislead_is_refused_in_every_view(
    name: str, url: str, host: None
) -> None:
    part = part_for(url)
    if part is None:  # not a web address at all: an error to the agent, no card
        assert not url.lower().startswith(("http:", "https:")) or len(url) > 2000
        return
    assert part.host == ""
    html, md, plain = views(part)
    assert "link refused (" in plain and "(host" not in plain
    assert "link refused" in md and "acpnb-host" not in html and "<a " not in html


def test_the_backslash_link_of_the_issue_names_the_host_the_browser_would_open() -> None:
    part = part_for("https://evil.example\\@accounts.google.com/oauth")
    assert part is not None
    plain = views(part)[2]
    assert "user name before its host" in plain and "Opens accounts.google.com" not in plain


def test_an_internationalised_host_is_shown_in_unicode_and_in_punycode() -> None:
    part = part_for("https://\u0430pple.com/login")
    assert part is not None
    html, _, plain = views(part)
    assert "(host \u0430pple.com, punycode xn--pple-43d.com)" in plain
    assert "\u0430pple.com, punycode <code class=acpnb-host>xn--pple-43d.com</code>" in html


def test_hidden_characters_of_a_refused_link_are_shown_not_hidden() -> None:
    part = part_for("https://user@evil.example/\u202emoc.elgoog")
    assert part is not None
    assert "\\u202e" in views(part)[2]


@pytest.mark.anyio
@pytest.mark.scripted_agent("in_process")
async def test_a_refused_link_is_declined_without_asking_anyone(agent: Agent) -> None:
    asked: list[str] = []

    async def handler(part: ElicitationPart) -> Any:
        asked.append(part.url)
        return "accept"

    bad, good = "https://accounts.google.com@evil.example/", "https://login.example.com/"
    async with agent.session(elicitation_handler=handler, bound=30) as session:
        steps = [{"request": "elicitation/create", "params": link(u)} for u in (bad, good)]
        result = await (await session.prompt(script(*steps))).finished
    assert [r["result"] for r in reports(result.text, "RESPONSE ")] == [
        {"action": "decline"},
        {"action": "accept"},
    ]
    assert asked == [good]
    first = next(p for p in result.parts if isinstance(p, ElicitationPart))
    assert (first.outcome, first.decided_by) == ("decline", "refused")


def test_headless_the_record_shows_the_browsers_host_and_refuses_misleading_links(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    urls = [u for _, u, _ in HOSTILE if u.lower().startswith("http") and len(u) < 2000]
    steps = [{"request": "elicitation/create", "params": link(u)} for u in urls]
    nb = execute([f"%%agent -a {scripted()}\n{script(*steps)}"], tmp_path, kernel=kernel)
    (transcript,) = transcripts(nb.cells[0])
    saved = [p for p in transcript["parts"] if p["type"] == "elicitation"]
    assert [p["url"] for p in saved] == urls
    shown = text(nb.cells[0])
    expected = {u: h for _, u, h in HOSTILE}
    for p in saved:
        part = ElicitationPart.from_json(p)
        assert part.host == (expected[part.url] or "")
        assert p["outcome"] == "decline"
    assert shown.count("link refused (") == sum(expected[u] is None for u in urls)
    (issue,) = [line for line in shown.splitlines() if "evil.example\\@accounts" in line]
    assert "link refused" in issue and "(host" not in issue  # urlsplit's accounts.google.com


# -- everywhere else a URL from the agent becomes a link -----------------------------------------


def anchors(html: str) -> list[tuple[str, str]]:
    """Each link's href and the host shown right after it (or "")."""
    return [(unescape(href), unescape(note)) for href, note in re.findall(_ANCHOR, html)]


_ANCHOR = (
    r"<a href=[\"']([^\"']*)[\"'][^>]*>.*?</a>(?:<span class=acpnb-muted> \(([^)]*)\)</span>)?"
)


def markdown_url(url: str) -> str:
    """`url` as a Markdown link destination: `<…>` keeps what a bare one would end at."""
    return "<" + url.replace("<", "%3C").replace(">", "%3E").replace("\n", "") + ">"


MD_TABLE = [(i, u, h) for i, u, h in HOSTILE if "\t" not in u and "\n" not in u]


@pytest.mark.parametrize(("name", "url", "host"), MD_TABLE, ids=[i for i, _, _ in MD_TABLE])
def test_a_markdown_link_opens_the_host_shown_beside_it(
    name: str, url: str, host: str | None
) -> None:
    for src in (
        f"[accounts.google.com]({markdown_url(url)})",
        f"![accounts.google.com]({markdown_url(url)})",
    ):
        found = anchors(to_html(src))
        if host is None:
            assert found == [], src
            continue
        ((href, note),) = found
        assert browser_host(href) == host
        assert host in note  # the label names another host: the real one is beside it
    record = inline(f"[accounts.google.com]({markdown_url(url)})")
    if host is None:
        assert "](" not in record
    else:
        dest = re.fullmatch(r"\[accounts\\\.google\\\.com\]\(([^)]*)\) \((.*)\)", record)
        assert dest is not None, record
        assert browser_host(dest.group(1)) == host and mdsafe.text(host) in dest.group(2)


@pytest.mark.parametrize(("name", "url", "host"), HOSTILE, ids=ids)
def test_a_resource_link_opens_the_host_shown_beside_it(
    name: str, url: str, host: str | None
) -> None:
    html = block({"type": "resource_link", "uri": url, "name": "sign-in.example.org"})
    found = anchors(html)
    if host is None:
        assert found == []
    else:
        ((href, note),) = found
        assert browser_host(href) == host and host in note


def test_a_label_that_is_its_own_address_needs_no_host_beside_it() -> None:
    assert anchors(to_html("<https://login.example.com/a>")) == [
        ("https://login.example.com/a", "")
    ]
    assert anchors(to_html("[login.example.com](https://login.example.com)")) == [
        ("https://login.example.com/", "")
    ]


@pytest.mark.parametrize(
    "relative", ["//evil.example/x", "/\\evil.example/x", "\\\\evil.example/x", "/%5C/evil.example"]
)
def test_a_relative_link_that_a_browser_reads_as_another_host_is_no_link(relative: str) -> None:
    src = f"[notes]({markdown_url(relative)})"
    record = re.findall(r"\]\(([^)]*)\)", inline(src))
    for href in [h for h, _ in anchors(to_html(src))] + record:
        assert ada_url.URL(href, base="https://lab.example/tree/").host == "lab.example", href


def test_a_relative_link_to_a_file_stays_a_link() -> None:
    assert anchors(to_html("[notes](docs/notes.md)")) == [("docs/notes.md", "")]


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://login.example.com\x00.evil.example/", "login.example.com.evil.example"),
        ("https://login.example.com/\x00@evil.example", "login.example.com"),
    ],
)
def test_a_nul_is_dropped_before_the_link_is_read_live_and_in_the_record(
    url: str, host: str
) -> None:
    """ada reads C strings (it would see the link cut at a NUL): NULs go first, as the saved
    record drops them, so the host decided on live is the one the record shows."""
    part = part_for(url)
    assert part is not None and part.host == host
    assert f"(host {host})" in views(part)[2]
    again = ElicitationPart.from_json(part.to_json())
    assert again.host == host
    ((href, note),) = anchors(block({"type": "resource_link", "uri": url, "name": "x"}))
    assert browser_host(href) == host and host in note


# -- an auth method's link ---------------------------------------------------------------------


class _Methods:
    """What `auth.how_to` reads of a client: the agent's auth methods."""

    def __init__(self, *methods: dict[str, Any]) -> None:
        self.auth_methods = list(methods)


@pytest.mark.parametrize(("name", "url", "host"), HOSTILE, ids=ids)
def test_an_auth_methods_link_is_shown_as_text_with_the_host_the_browser_opens(
    name: str, url: str, host: str | None
) -> None:
    method = {"id": "key", "name": "API key", "type": "env_var", "vars": [], "link": url}
    (offered,) = auth.how_to(_Methods(method))  # type: ignore[arg-type]
    line = offered.note
    if host is None:
        assert "credentials link is refused (" in line and "credentials at" not in line
    else:
        found = re.search(r"credentials at (\S+) \(host (.*)\)$", line)
        assert found is not None, line
        assert browser_host(found.group(1)) == host and host in found.group(2)
