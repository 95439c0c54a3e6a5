"""Action parsing: plain and <think>/<action> formats, admissibility, raw pass-through."""

import pytest

from gigpo.agent.parse import parse_response

ADM = ["up", "down", "left", "right"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("up", "up"),
        ("  Left \n more text", "left"),
        ("\n\nDOWN", "down"),
        ("", None),
        ("   \n ", None),
        ("jump", None),
        ("up left", None),
    ],
)
def test_plain(text, expected):
    assert parse_response(text, "plain", ADM).action == expected


def test_plain_without_admissible_passes_first_line():
    assert parse_response("search[red shoes]\nignored", "plain", None).action == "search[red shoes]"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think>go up</think><action>up</action>", "up"),
        ("<think>x</think>\n<action> Right </action>", "right"),
        ("<action>up</action>", "up"),
        ("<think>x</think>", None),
        ("<action></action>", None),
        ("<action>up</action><action>down</action>", None),
        ("<action>up", None),
        ("<ACTION>left</ACTION>", "left"),
        ("<action>fly</action>", None),
    ],
)
def test_think_action(text, expected):
    assert parse_response(text, "think-action", ADM).action == expected


def test_require_think():
    assert parse_response("<action>up</action>", "think-action", ADM, require_think=True).action is None
    assert parse_response("<action>up</action><think>late</think>", "think-action", ADM, require_think=True).action is None
    assert parse_response("<think>a</think><action>up</action>", "think-action", ADM, require_think=True).action == "up"


def test_errors_say_why():
    assert "inadmissible" in parse_response("fly", "plain", ADM).error
    assert "no <action>" in parse_response("hello", "think-action", ADM).error


def test_raw_passes_everything():
    text = "<think>a</think><search>x</search>"
    assert parse_response(text, "think-action", None, raw=True).action == text


def test_unknown_format():
    with pytest.raises(ValueError, match="unknown response format"):
        parse_response("up", "xml", ADM)
