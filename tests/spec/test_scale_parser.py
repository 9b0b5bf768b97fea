"""One ``Scale`` with one parser: every spelling a user or a store writes reads the same, everywhere."""

from __future__ import annotations

import pytest

from scijudge.errors import InputError
from scijudge.spec.scales import (
    ALL_JUDGES,
    Scale,
    parse_scale_options,
    recorded_scale,
    recorded_scales,
    scale_mapping,
)


@pytest.mark.parametrize("text, expected", [
    ("1..5", Scale(1, 5, 1)),
    ("0..4 step 0.5", Scale(0, 4, 0.5)),
    ("1..5 step 0.5 (continuous)", Scale(1, 5, 0.5, True)),
    ("1:5:1", Scale(1, 5, 1)),
    ("1,5,1", Scale(1, 5, 1)),
    (" 0 , 10 , 2 ", Scale(0, 10, 2)),
    ("1,5,1,continuous", Scale(1, 5, 1, True)),
    ("1:5:0.5:continuous", Scale(1, 5, 0.5, True)),
    ([1, 5, 1], Scale(1, 5, 1)),
    ((1.0, 5.0, 0.5, "continuous"), Scale(1, 5, 0.5, True)),
    ("-4..4", Scale(-4, 4, 1)),
])
def test_every_spelling_reads_the_same(text, expected):
    assert Scale.parse(text) == expected
    assert Scale.parse(expected.meta()) == expected  # what stores record reads back
    assert Scale.parse(expected.text()) == expected  # and what messages show


@pytest.mark.parametrize("text, words", [
    ("1,5", "must be"), ("a,b,c", "must hold numbers"), ("5,1,1", "lo < hi"), ("1,5,0", "step > 0"),
    ("1..5 step", "must be"), ("1,5,1,discrete", "must be"),
])
def test_bad_scales_are_one_error_naming_the_field(text, words):
    with pytest.raises(InputError, match=words) as err:
        Scale.parse(text, "judge 'j'")
    assert err.value.field == "scale" and "judge 'j'" in str(err.value)


def test_options_name_one_judge_or_all():
    given = parse_scale_options(["j.a=1:5:1", "0..10", "j.b = 1,5,0.5,continuous"])
    assert given == {"j.a": Scale(1, 5, 1), ALL_JUDGES: Scale(0, 10, 1), "j.b": Scale(1, 5, 0.5, True)}
    with pytest.raises(InputError, match="judge 'j.c'"):
        parse_scale_options(["j.c=1,5"])
    assert scale_mapping(["j.a", "j.z"], ["j.a=1..5"], {"j.z": "0,10,1", "other": "1,3,1"}) == {
        "j.a": Scale(1, 5, 1), "j.z": "0,10,1"}
    assert scale_mapping(["j.a"], None, None) is None


def test_sources_that_disagree_are_refused_whatever_their_order():
    one = {"b": "1,5,1", "a": [0.0, 10.0, 1.0]}
    other = dict(reversed(list(one.items())))
    messages = set()
    for recorded in (one, other):
        with pytest.raises(InputError, match="different scales in the runs") as err:
            recorded_scale("j", recorded)
        messages.add(str(err.value))
    assert len(messages) == 1
    assert "0..10 step 1 (run 'a'); 1..5 step 1 (run 'b')" in messages.pop()
    # agreeing grids: continuous when any source says so, in either order
    for recorded in ({"a": "1,5,1", "b": "1,5,1,continuous"}, {"b": "1,5,1,continuous", "a": "1,5,1"}):
        assert recorded_scale("j", recorded) == Scale(1, 5, 1, True)
    assert recorded_scale("j", {"a": None}) is None
    assert recorded_scales({"a": {"x": "1,5,1"}, "b": {"y": [0, 4, 0.5]}}) == {"x": Scale(1, 5, 1),
                                                                              "y": Scale(0, 4, 0.5)}


def test_importers_calibration_and_juries_parse_with_it():
    from scijudge.importers.scales import parse_scales
    from scijudge.metrics.calibration.scales import parse_scale
    from scijudge.metrics.jury import api as jury_api
    from scijudge.metrics.jury import scales as jury_scales

    assert parse_scales(["j=1:5:1", "1..4"]) == {"j": [1.0, 5.0, 1.0], "": [1.0, 4.0, 1.0]}  # import-judgments too
    assert parse_scale("1:5:0.5:continuous") == ((1.0, 5.0, 0.5), True)
    assert jury_api.Scale is Scale and jury_scales.Scale is Scale
