import pytest

from attention_lib.presentation.tables import format_table, order_of_magnitude


def test_numbers_are_right_aligned_and_text_left_aligned():
    out = format_table([("a", 1.5), ("long name", 10.25)], ["name", "x"], [None, ".2f"])
    lines = out.splitlines()
    assert lines[0] == "name           x"
    assert lines[2] == "a           1.50"
    assert lines[3] == "long name  10.25"


def test_each_column_keeps_its_own_format():
    out = format_table([(0.5, 0.5)], ["p", "q"], [".1%", ".3f"])
    assert out.splitlines()[2].split() == ["50.0%", "0.500"]


def test_missing_cells_print_as_a_dash_and_bools_as_words():
    out = format_table([(None, True)], ["a", "b"], ".2f")
    assert out.splitlines()[2].split() == ["-", "True"]


def test_a_row_of_the_wrong_length_names_the_row_and_the_columns():
    with pytest.raises(ValueError, match=r"row 1 has 1 cells but the table has 2 columns \(a, b\)"):
        format_table([(1, 2), (3,)], ["a", "b"])


def test_formats_of_the_wrong_length_are_refused():
    with pytest.raises(ValueError, match="formats has 3 entries"):
        format_table([(1, 2)], ["a", "b"], [".1f", ".1f", ".1f"])


def test_whole_numbers_stay_whole_under_a_float_format():
    out = format_table([(3, 0.25)], ["n", "AER"], ".2f")
    assert out.splitlines()[2].split() == ["3", "0.25"]


@pytest.mark.parametrize(
    "x, expected",
    [
        (9.6e-08, "about 1e-07"),
        (1.01e-07, "about 1e-07"),
        (3.1e-15, "about 1e-15"),
        (3.2e-15, "about 1e-14"),
        (-0.02, "about 1e-02"),
        (0.0, "0"),
        (7.0, "about 1e+01"),
    ],
)
def test_order_of_magnitude_is_the_nearest_power_of_ten_on_a_log_scale(x, expected):
    assert order_of_magnitude(x) == expected
    if x:
        power = float(expected.split()[1])
        assert power / 10**0.5 <= abs(x) <= power * 10**0.5


def test_order_of_magnitude_prints_what_is_under_the_floor_as_below_it():
    assert order_of_magnitude(0.0, floor=1e-15) == "below 1e-15"
    assert order_of_magnitude(3e-17, floor=1e-15) == "below 1e-15"
    assert order_of_magnitude(3e-14, floor=1e-15) == "about 1e-14"


@pytest.mark.parametrize("x", [float("nan"), float("inf")])
def test_order_of_magnitude_refuses_what_is_not_finite(x):
    with pytest.raises(ValueError, match="x must be a finite number"):
        order_of_magnitude(x)
