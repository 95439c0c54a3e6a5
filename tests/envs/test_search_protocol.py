"""Search-R1 protocol parsing, <information> rendering, answer normalisation, EM/F1 and per-source summaries."""

from __future__ import annotations

import pytest

from gigpo.envs.search.metrics import (
    exact_match,
    f1_score,
    format_source_table,
    normalize_answer,
    summarize_by_source,
)
from gigpo.envs.search.protocol import format_information, parse_action, parse_information


@pytest.mark.parametrize(
    ("text", "kind", "content"),
    [
        ("<search>capital of Quessia</search>", "search", "capital of Quessia"),
        ("<think>I should look it up.</think>\n<search>  Velmora Quastin born </search>", "search",
         "Velmora Quastin born"),
        ("<think>done</think> <answer> 1873 </answer> trailing text", "answer", "1873"),
        ("<answer>line one\nline two</answer>", "answer", "line one\nline two"),
        # Tags inside a closed <think> are reasoning, not actions.
        ("<think>maybe <answer>X</answer>? no, search first</think><search>q</search>", "search", "q"),
        # A hallucinated <information> block after the query does not change the action.
        ("<search>q</search><information>Doc 1(Title: x) y</information>", "search", "q"),
    ],
)
def test_valid_actions(text: str, kind: str, content: str) -> None:
    parsed = parse_action(text)
    assert parsed.valid and parsed.kind == kind and parsed.content == content and parsed.error is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("I think the answer is Paris.", "no <search> or <answer> tag"),
        ("", "no <search> or <answer> tag"),
        ("<Search>upper case</Search>", "no <search> or <answer> tag"),
        ("< search >spaced</ search >", "no <search> or <answer> tag"),
        ("<search>   </search>", "empty <search>"),
        ("<answer></answer>", "empty <answer>"),
        ("<search>q</search> then <answer>a</answer>", "both <search> and <answer> in one response"),
        ("<answer>a</answer><search>q</search>", "both <search> and <answer> in one response"),
        ("<search>unclosed query", "unbalanced tags"),
        ("<search>a</search></search>", "unbalanced tags"),
        ("<search>outer <search>inner</search></search>", "nested tags"),
        ("</search>backwards<search>", "closing tag before opening tag"),
        ("<search>a</search><search>b</search>", "more than one action in one response"),
        ("<answer>a</answer> <answer>b</answer>", "more than one action in one response"),
        ("<think>unclosed think <search>q</search>", None),  # valid: an unclosed <think> hides nothing
    ],
)
def test_invalid_and_edge_actions(text: str, reason: str | None) -> None:
    parsed = parse_action(text)
    if reason is None:
        assert parsed.kind == "search" and parsed.content == "q"
    else:
        assert not parsed.valid and parsed.kind is None and parsed.error == reason


def test_format_information_matches_search_r1_layout() -> None:
    docs = [{"contents": '"Vrethunvik"\nVrethunvik is a city.\nSecond line.', "id": "1"},
            {"contents": '"Joxcamark"\nJoxcamark is a country.', "id": "2"}]
    info = format_information(docs)
    assert info == ('<information>Doc 1(Title: "Vrethunvik") Vrethunvik is a city.\nSecond line.\n'
                    'Doc 2(Title: "Joxcamark") Joxcamark is a country.</information>')
    assert parse_information(info) == [("Vrethunvik", "Vrethunvik is a city.\nSecond line."),
                                       ("Joxcamark", "Joxcamark is a country.")]
    assert format_information([]) == "<information></information>"
    assert parse_information(format_information([])) == []


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("  a  CAT, an owl; the end.  ", "cat owl end"),
        ("the-end", "theend"),  # punctuation is removed before articles, as in Search-R1
        ("Anna and the Theatre", "anna and theatre"),  # only whole-word articles go
        ("1,873", "1873"),
        ("Ça va!", "ça va"),
        ("", ""),
        ("The", ""),
    ],
)
def test_normalize_answer(raw: str, normal: str) -> None:
    assert normalize_answer(raw) == normal


def test_exact_match_and_f1() -> None:
    assert exact_match("the Gumste River", ["Gumste River", "Gumste"]) == 1.0
    assert exact_match("Gumste", ["Gumste River", "Gumste"]) == 1.0
    assert exact_match("gumste river.", "Gumste River") == 1.0  # a string gold works like a one-element list
    assert exact_match("Gumste River flows", ["Gumste River"]) == 0.0
    assert exact_match("", ["Paris"]) == 0.0
    assert exact_match("The", ["a"]) == 1.0  # both normalise to empty
    assert f1_score("Gumste River", ["Gumste River"]) == 1.0
    # pred {gumste, river, flows} vs gold {gumste, river}: P = 2/3, R = 1 -> F1 = 0.8
    assert f1_score("Gumste River flows", ["Gumste River"]) == pytest.approx(0.8)
    assert f1_score("Gumste River flows", ["Lyr", "Gumste River"]) == pytest.approx(0.8)  # max over golds
    assert f1_score("river river", ["river"]) == pytest.approx(2 * 0.5 * 1 / 1.5)  # bag, not set, overlap
    assert f1_score("nothing shared", ["Paris"]) == 0.0
    assert f1_score("", ["Paris"]) == 0.0
    assert f1_score("the", ["an"]) == 1.0


def test_summarize_by_source_is_per_source_and_micro_all() -> None:
    rows = [
        {"data_source": "nq", "em": 1.0, "f1": 1.0},
        {"data_source": "hotpotqa", "em": 0.0, "f1": 0.5},
        {"data_source": "nq", "em": 0.0, "f1": 0.2},
        {"data_source": "hotpotqa", "em": 1.0, "f1": 1.0},
        {"data_source": "nq", "em": 1.0, "f1": 1.0},
        {"data_source": "nq"},  # cut by the turn limit: counts as 0
    ]
    s = summarize_by_source(rows)
    assert s["nq"] == {"n": 4.0, "em": 0.5, "f1": pytest.approx(2.2 / 4)}
    assert s["hotpotqa"] == {"n": 2.0, "em": 0.5, "f1": 0.75}
    assert s["all"]["n"] == 6 and s["all"]["em"] == pytest.approx(3 / 6) and s["all"]["f1"] == pytest.approx(3.7 / 6)
    # Row order does not matter.
    assert summarize_by_source(rows[::-1]) == s
    table = format_source_table(s, title="eval")
    lines = table.splitlines()
    assert lines[0] == "eval" and lines[1].split() == ["data_source", "n", "EM", "F1"]
    assert [ln.split()[0] for ln in lines[2:]] == ["hotpotqa", "nq", "all"]
    assert lines[3].split() == ["nq", "4", "0.500", "0.550"]
    assert summarize_by_source([]) == {}
