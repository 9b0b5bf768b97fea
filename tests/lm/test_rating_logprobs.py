"""rating_distribution / expected_rating on hand-built OpenAI-style logprobs, with hand-computed answers."""

from __future__ import annotations

import math

import pytest
from dspy.lm15 import TokenLogprob, TopLogprob

from scijudge.lm.logprobs import as_probs, expected_rating, rating_distribution


def _content(tokens: list[str], value_index: int, alternatives: list[tuple[str, float]]) -> list[dict]:
    """Tokens with probability 1 except the value token, whose top alternatives are given as probabilities."""
    content = []
    for i, token in enumerate(tokens):
        if i == value_index:
            chosen = dict(alternatives)[token]
            tops = [{"token": t, "logprob": math.log(p)} for t, p in alternatives]
            content.append({"token": token, "logprob": math.log(chosen), "top_logprobs": tops})
        else:
            content.append({"token": token, "logprob": 0.0, "top_logprobs": [{"token": token, "logprob": 0.0}]})
    return content


LLAMA_TOKENS = ['{"', "rationale", '":', ' "', "fine", '",', ' "', "rating", '":', " ", "4", "}"]


def test_renormalises_over_allowed_ratings() -> None:
    content = _content(LLAMA_TOKENS, 10, [("4", 0.5), ("3", 0.2), ("5", 0.1), ("x", 0.1)])
    dist = rating_distribution(content)
    # allowed mass 0.5 + 0.2 + 0.1 = 0.8
    assert dist == pytest.approx({1: 0.0, 2: 0.0, 3: 0.25, 4: 0.625, 5: 0.125})
    assert expected_rating(dist) == pytest.approx(3 * 0.25 + 4 * 0.625 + 5 * 0.125)  # 3.875
    assert as_probs(dist) == pytest.approx({"1": 0.0, "2": 0.0, "3": 0.25, "4": 0.625, "5": 0.125})


def test_value_token_with_a_leading_space_and_spellings_of_one_value_add_up() -> None:
    tokens = ['{"', "rating", '":', " 4", "}"]
    content = _content(tokens, 3, [(" 4", 0.6), (" 3", 0.2), ("3", 0.1), (" 5", 0.05)])
    dist = rating_distribution(content)
    assert dist == pytest.approx({1: 0.0, 2: 0.0, 3: 0.3 / 0.95, 4: 0.6 / 0.95, 5: 0.05 / 0.95})


def test_token_that_carries_separator_and_value() -> None:
    tokens = ['{"', "rating", '": 2', "}"]
    content = _content(tokens, 2, [('": 2', 0.5), ('": 1', 0.3), ('":', 0.2)])
    assert rating_distribution(content, values=(1, 2, 3)) == pytest.approx({1: 0.375, 2: 0.625, 3: 0.0})


def test_escaped_field_name_inside_the_rationale_is_ignored() -> None:
    tokens = ['{"', "rationale", '": "', "a \\\"rating\\\": ", "1", ' is odd",', ' "rating": ', "5", "}"]
    content = _content(tokens, 7, [("5", 0.9), ("4", 0.1)])
    assert rating_distribution(content) == pytest.approx({1: 0.0, 2: 0.0, 3: 0.0, 4: 0.1, 5: 0.9})


def test_chosen_token_missing_from_top_list_still_counts() -> None:
    content = _content(LLAMA_TOKENS, 10, [("4", 0.4), ("2", 0.4)])
    content[10]["top_logprobs"] = [{"token": "2", "logprob": math.log(0.4)}]
    assert rating_distribution(content) == pytest.approx({1: 0.0, 2: 0.5, 3: 0.0, 4: 0.5, 5: 0.0})


def test_unknown_cases_return_none() -> None:
    assert rating_distribution(None) is None
    assert rating_distribution([]) is None
    no_field = _content(['{"', "score", '":', " ", "4", "}"], 4, [("4", 1.0)])
    assert rating_distribution(no_field) is None
    two_digits = _content(['{"', "rating", '":', " ", "4", "9", "}"], 4, [("4", 0.7), ("3", 0.3)])
    assert rating_distribution(two_digits) is None  # the value is 49: first-digit alternatives are not values
    nothing_allowed = _content(LLAMA_TOKENS, 10, [("4", 0.5), ("7", 0.5)])
    assert rating_distribution(nothing_allowed, values=(1, 2, 3)) is None
    assert expected_rating(None) is None


def test_wrapper_dict_and_lm15_objects_are_read_the_same() -> None:
    content = _content(LLAMA_TOKENS, 10, [("4", 0.5), ("3", 0.5)])
    objects = [
        TokenLogprob(token=e["token"], logprob=e["logprob"],
                     top=tuple(TopLogprob(token=t["token"], logprob=t["logprob"]) for t in e["top_logprobs"]))
        for e in content
    ]
    expected = {1: 0.0, 2: 0.0, 3: 0.5, 4: 0.5, 5: 0.0}
    assert rating_distribution({"content": content}) == pytest.approx(expected)
    assert rating_distribution(objects) == pytest.approx(expected)


@pytest.mark.slow
def test_demo_judges_offline_and_stores_rating_probabilities(tmp_path, monkeypatch):
    """The README's main job end to end: tiny random model, full chain, run store with P(rating).

    In this process, through the CLI app: torch and transformers are imported once per test run, not once more
    in a fresh interpreter (the subprocess tests of tests/run and tests/commands run ``python -m scijudge``)."""
    import math

    from typer.testing import CliRunner

    from scijudge import Run
    from scijudge.cli import app

    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # the demo sets it; restored after this test
    done = CliRunner().invoke(app, ["demo", "--tiny", "--workdir", str(tmp_path / "tiny"), "--run", str(tmp_path / "demo.sqlite"),
                                    "--no-progress", "-j", "yescieval.qa.correctness"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    assert "meaningless" in done.stdout
    # the store is closed at the end: one whole file, nothing left in a -wal beside it, no lock file
    assert sorted(p.name for p in tmp_path.glob("demo.sqlite*")) == ["demo.sqlite"]
    frame = Run(tmp_path / "demo.sqlite").to_pandas()
    assert len(frame) == 12 and (frame.status == "ok").all()
    for probs, result, score in zip(frame.probs, frame.result, frame.score):
        assert math.isclose(sum(probs.values()), 1.0, rel_tol=1e-6)
        assert math.isclose(result["expected_rating"], sum(int(k) * p for k, p in probs.items()), rel_tol=1e-9)
        assert result["rating"] == score
