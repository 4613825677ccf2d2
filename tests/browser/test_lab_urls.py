"""Links from the agent in JupyterLab (issue 20, item 3): for every URL of
tests/hostile/test_urls.py's table, the host a card shows is the host Chromium itself opens for the
link's href (`new URL(href).host`); a refused link is no link, live or in the record; the answer's
Markdown links show beside them the host Chromium opens. Screenshot:
test-artifacts/lab-view-urls.png."""

from __future__ import annotations

from typing import Any

import ada_url
import pytest

from tests.browser.test_lab import output
from tests.browser.test_lab_view import cell, done, run, shoot
from tests.hostile.test_urls import HOSTILE, MD_TABLE, link, markdown_url

# What this test checks is in the notebook it opens, not in a fresh browser context.
pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

#: The table's web URLs an agent may ask to visit (a longer one is an error to the agent).
ASKED = [(u, h) for _, u, h in HOSTILE if u.lower().startswith("http") and len(u) < 2000]

# What a live form shows and links to, read by the page: the href, Chromium's host of it, and
# the host the form says it opens.
LIVE_FORM = """(box) => {
  const a = box.querySelector('a');
  return {href: a && a.getAttribute('href'), browser: a && new URL(a.href).host,
          shown: box.querySelector('.acpnb-tv-host')?.textContent ?? null,
          text: box.innerText};
}"""

# Each card of the record: the address and host it shows, Chromium's host of that address.
RECORD = """(root) => Array.from(root.querySelectorAll('.acpnb-elicit'), (card) => {
  const href = card.querySelector('.acpnb-href')?.textContent ?? null;
  return {href, browser: href && new URL(href).host, links: card.querySelectorAll('a').length,
          shown: card.querySelector('.acpnb-host')?.textContent ?? null,
          refused: card.innerText.includes('link refused')};
})"""

# Each link of the answer: Chromium's host of its href, and the note after it.
ANSWER_LINKS = """(root) => Array.from(root.querySelectorAll('.acpnb-answer a'),
  (a) => ({browser: new URL(a.href).host, note: a.nextElementSibling?.className === 'acpnb-muted'
           ? a.nextElementSibling.textContent : ''}))"""


def test_ada_reads_every_url_of_the_table_as_chromium_does(page: Any) -> None:
    urls = [u for _, u, _ in HOSTILE]
    chromium = page.evaluate(
        "(urls) => urls.map((u) => { try { return new URL(u).host; } catch (e) { return null; } })",
        urls,
    )
    ours = []
    for url in urls:
        try:
            ours.append(str(ada_url.URL(url).host))
        except ValueError:
            ours.append(None)
    assert chromium == ours


def test_a_link_card_shows_the_host_chromium_opens_and_refused_ones_are_no_link(
    page: Any, lab: Any
) -> None:
    answer = " ".join(f"[accounts.google.com]({markdown_url(u)})" for _, u, _ in MD_TABLE)
    steps = [{"request": "elicitation/create", "params": link(u)} for u, _ in ASKED]
    run(page, lab, "urls.ipynb", cell(*steps, {"say": answer}))
    out = output(page)
    for url, host in ASKED:
        if host is None:
            continue  # declined unasked: no form
        box = out.locator(".acpnb-elicit .acpnb-tv-form").first
        box.wait_for(timeout=60_000)
        seen = box.evaluate(LIVE_FORM)
        assert seen["browser"] == seen["shown"] == host, (url, seen)
        assert f"Opens {host}" in seen["text"] or f"punycode {host}" in seen["text"]
        request = box.get_attribute("data-request")
        box.locator("button", has_text="Decline").click()
        out.locator(f".acpnb-tv-form[data-request='{request}']").wait_for(state="detached")
    done(page)
    shoot(page, "urls")
    record = page.locator(".jp-Notebook .jp-Cell").first
    cards = record.evaluate(RECORD)
    assert len(cards) == len(ASKED)
    for (url, host), card in zip(ASKED, cards, strict=True):
        assert card["links"] == 0, url  # the record never follows a link
        if host is None:
            assert card["refused"] and card["href"] is None and card["shown"] is None, url
        else:
            assert card["browser"] == card["shown"] == host and not card["refused"], url
    links = record.evaluate(ANSWER_LINKS)
    expected = [h for _, _, h in MD_TABLE if h is not None]
    assert [a["browser"] for a in links] == expected
    assert all(a["browser"] in a["note"] for a in links), links


def test_the_link_of_the_issue_is_refused_live_not_shown_as_google(page: Any, lab: Any) -> None:
    url = "https://evil.example\\@accounts.google.com/oauth"
    run(page, lab, "issue-url.ipynb", cell({"request": "elicitation/create", "params": link(url)}))
    card = page.locator(".jp-Notebook .jp-Cell").first.locator(".acpnb-elicit")
    # Either it is asked (a form: the bug) or it was declined without asking.
    card.locator(".acpnb-tv-form").or_(card.filter(has_text="declined")).first.wait_for()
    assert card.locator(".acpnb-tv-form").count() == 0
    done(page)
    assert "link refused (it has a user name before its host" in card.inner_text()
    assert "Opens accounts.google.com" not in card.inner_text()
    assert card.locator("a").count() == 0
