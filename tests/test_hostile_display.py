"""Agent-chosen values in what `%agent` commands and the widgets show, in process.

Every string an agent picks (titles, names, ids, modes, currencies, dates, paths) is tried with
every payload of `hostile_payloads`, and every number with values that used to crash or leak (huge
ints, NaN, infinities, bools, strings, nested garbage). Each display must come out, carry no
Markdown, and pass `markup_check`. tests/test_hostile_commands.py does the same through real
kernels and the scripted agent.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_notebook.chat.widget import status_html
from acp_notebook.display import views
from acp_notebook.notebook.command_docs import sessions_doc, status_doc
from acp_notebook.protocol.state import Usage
from acp_notebook.widgets.controls import option_label, option_tip
from tests.hostile_payloads import TEXTS as PAYLOADS
from tests.markup_check import bundle_problems, html_problems, self_test

pytestmark = pytest.mark.timeout(60)

NUMBERS: list[Any] = [
    10**400,
    -(10**400),
    10**4000,
    float("nan"),
    float("inf"),
    float("-inf"),
    1e308,
    -0.0,
    True,
    False,
    None,
    "12",
    "<b>1</b>",
    [1, [2, [3, [4, [5]]]]],
    {"a": {"b": float("nan")}},
    0,
    -5,
    2**63,
    0.5,
]


def facts(value: Any) -> dict[str, Any]:
    """`%agent status` facts with `value` in every field the agent chooses."""
    return {
        "session": "demo",
        "agent": "scripted",
        "agent_info": {"name": value, "title": value, "version": value},
        "session_id": value,
        "title": value,
        "mode": value,
        "modes": [value, value],
        "config": {},
        "config_options": [{"id": value, "name": value, "currentValue": value}],
        "commands": [value],
        "pid": 1234,
        "turns": 2,
        "running": True,
        "usage": {"used": 10, "size": 100, "cost": {"amount": 0.5, "currency": value}},
    }


def assert_safe(bundle: dict[str, Any]) -> None:
    assert "text/markdown" not in bundle, "agent text is never handed over as Markdown"
    assert set(bundle) == {"text/html", "text/plain"}
    assert bundle_problems(bundle) == []


def test_the_checker_finds_what_it_must() -> None:
    self_test()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_status_shows_hostile_strings_as_text(payload: str) -> None:
    bundle = status_doc(facts(payload)).bundle()
    assert_safe(bundle)
    # The value is shown, as text: its first visible word reaches the plain form.
    word = views.text(payload).split(" ")[0][:20]
    assert word in bundle["text/plain"]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_status_with_a_lone_backtick_in_the_other_fields(payload: str) -> None:
    # A backtick in one value used to pair with the code span of the next and expose it.
    for field_name, value in facts(payload).items():
        if field_name in {"session", "agent", "pid", "turns", "running"}:
            continue
        mixed = {**facts("a ` b"), field_name: value}
        assert_safe(status_doc(mixed).bundle())


@pytest.mark.parametrize("payload", PAYLOADS)
def test_sessions_table_shows_hostile_strings_as_text(payload: str) -> None:
    listed = [{"sessionId": payload, "title": payload, "updatedAt": payload, "cwd": payload}]
    bundle = sessions_doc(payload, listed).bundle()
    assert_safe(bundle)
    assert bundle["text/html"].count("<tr>") == 2  # header and one row: no cell broke out
    assert bundle["text/html"].count("<td>") == 4


@pytest.mark.parametrize("value", NUMBERS, ids=repr)
def test_numbers_never_raise_and_stay_finite(value: Any) -> None:
    for usage in (
        {"used": value, "size": 200_000},
        {"used": 5, "size": value},
        {"used": value, "size": value, "cost": {"amount": value, "currency": "USD"}},
    ):
        bundle = status_doc({**facts("x"), "usage": usage}).bundle()
        assert_safe(bundle)
        context = next(line for line in bundle["text/plain"].splitlines() if "context" in line)
        assert len(context) < 200, context  # no 400-digit number, no 1e300 percent
        for word in ("nan", "inf"):
            assert word not in context.lower().replace("invalid", "").replace("infinite", "")
    shown = views.number(value)
    assert shown and len(shown) < 200


def test_numbers_read_well() -> None:
    assert views.number(123456) == "123,456"
    assert views.number(10**400) == "about 10^400"
    assert views.number(2**70) == "1.18e+21"
    assert views.number(float("nan")) == "invalid (not a number)"
    assert views.number(float("-inf")) == "invalid (infinite)"
    assert views.number(True) == "true"
    assert views.percent(50, 200) == "25%"
    assert views.percent(10**400, 1) == ""
    assert views.percent(1, 10**400) == "0%"
    assert views.percent(5, 0) == ""
    assert views.money(0.01234, "EUR") == "0.0123 EUR"
    assert views.money(float("nan"), "USD") == "invalid (not a number) USD"


@pytest.mark.parametrize("value", NUMBERS, ids=repr)
def test_text_of_anything_is_one_bounded_line(value: Any) -> None:
    shown = views.text(value)
    assert "\n" not in shown and len(shown) <= views.LIMIT


def test_a_long_value_is_cut_and_a_secret_masked_before_the_cut() -> None:
    secret = "sk-" + "k" * 40
    title = "t" * 190 + secret
    bundle = status_doc(
        {**facts("x"), "title": title}, mask=lambda s: s.replace(secret, "[secret]")
    ).bundle()
    assert "sk-kkk" not in bundle["text/plain"] and "sk-kkk" not in bundle["text/html"]
    long = status_doc({**facts("x"), "title": "a" * 100_000}).bundle()["text/plain"]
    assert len(long) < 3000


def test_lists_the_agent_sends_are_bounded() -> None:
    many = {
        **facts("x"),
        "commands": [f"c{i}" for i in range(5000)],
        "config_options": [{"id": f"o{i}"} for i in range(5000)],
    }
    plain = status_doc(many).bundle()["text/plain"]
    assert "4950 more" in plain and len(plain) < 20_000


@pytest.mark.parametrize("garbage", [None, 5, "x", [1, 2], {"a": [None]}, [[["deep"]]]], ids=repr)
def test_status_and_sessions_of_malformed_data(garbage: Any) -> None:
    broken = {key: garbage for key in facts("x")}
    assert_safe(status_doc(broken).bundle())
    assert_safe(status_doc({}).bundle())
    assert_safe(sessions_doc("a", [garbage, {"sessionId": garbage}]).bundle())


@pytest.mark.parametrize("payload", PAYLOADS)
def test_widget_texts_are_escaped(payload: str) -> None:
    html = status_html(payload, payload, Usage(10**400, 0, float("nan"), payload), True)
    assert html_problems(html) == []
    assert 'class="mathjax_ignore"' in html  # a `$` in a value is not typeset
    assert (
        html_problems(
            views.html_span(
                views.Strong("Permission requested"),
                " (",
                views.Value(payload),
                "): ",
                views.Value(payload),
            )
        )
        == []
    )
    # A Button's description is text in ipywidgets 8; it still gets one bounded line.
    label = option_label({"optionId": payload, "name": payload, "kind": "allow_once"})
    assert "\n" not in label and len(label) < 100


@pytest.mark.parametrize(
    ("name", "kind", "label"),
    [
        # The agent's name is the label (the ACP spec), when its words say what the kind does:
        # the demo agent's, the scripted agent's, and a real agent's (tests/agents/REAL_AGENTS.md).
        ("Allow", "allow_once", "Allow"),
        ("Allow once", "allow_once", "Allow once"),
        ("Always allow", "allow_always", "Always allow"),
        ("Reject", "reject_once", "Reject"),
        ("Always reject", "reject_always", "Always reject"),
        ("Always Allow This Tool", "allow_always", "Always Allow This Tool"),
        ("Never Allow This Tool", "reject_always", "Never Allow This Tool"),
        ("Yes, and don’t ask again", "allow_always", "Yes, and don’t ask again"),
        ("Don't allow", "reject_once", "Don't allow"),
        # A name that contradicts its kind: our words for the kind follow it.
        ("Reject", "allow_always", "Reject (allows always)"),
        ("Deny", "allow_once", "Deny (allows once)"),
        ("Don't allow", "allow_once", "Don't allow (allows once)"),
        ("Allow", "reject_once", "Allow (rejects once)"),
        ("Allow or reject", "allow_once", "Allow or reject (allows once)"),
        # An *_always kind whose name does not say "always".
        ("Allow", "allow_always", "Allow (allows always)"),
        ("Allow once", "allow_always", "Allow once (allows always)"),
        ("Reject", "reject_always", "Reject (rejects always)"),
        # A name that says nothing we can read (no word of ours, another script, a homoglyph).
        ("Option A", "allow_once", "Option A (allows once)"),
        ("Аllow", "reject_once", "Аllow (rejects once)"),  # a Cyrillic А
        ("Ablehnen", "allow_always", "Ablehnen (allows always)"),
        # No name: the id; neither: our words alone; an unknown kind says so.
        ("", "reject_always", "Always reject"),
        ("Go", "yolo", "Go (unknown kind)"),
    ],
)
def test_permission_buttons_read_as_the_agent_names_them_unless_the_name_lies(
    name: str, kind: str, label: str
) -> None:
    assert option_label({"name": name, "kind": kind}) == label


def test_a_button_name_is_judged_as_shown_masked_and_cut() -> None:
    # Past the 60 characters shown, a word says nothing: the name is judged as it is shown.
    padded = "Reject " + "x" * 60 + " always allow"
    assert option_label({"name": padded, "kind": "allow_always"}).endswith("… (allows always)")
    # The id stands in for a missing name, under the same rule.
    assert option_label({"optionId": "allow", "kind": "allow_once"}) == "allow"
    assert option_label({"optionId": "allow", "kind": "reject_once"}) == "allow (rejects once)"
    # The kind is the tooltip, in our words, whatever the name.
    assert "reject_always" in option_tip("reject_always")
    assert "does not define" in option_tip("yolo") and "does not define" in option_tip(None)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=30)
    | st.sampled_from(PAYLOADS),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(sorted(facts("x"))), json_values), json_values)
def test_any_json_makes_a_safe_display(fields: dict[str, Any], listing: Any) -> None:
    assert_safe(status_doc({**facts("x"), **fields}).bundle())
    sessions = listing if isinstance(listing, list) else [listing]
    assert_safe(sessions_doc("agent", sessions).bundle())
    for value in (listing, *fields.values()):
        assert "\n" not in views.text(value)
        if isinstance(value, float) and not math.isfinite(value):
            assert views.number(value).startswith("invalid")
