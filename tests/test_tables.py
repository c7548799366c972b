import pytest

from attention_lib.presentation.tables import format_table, power_of_ten_above


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
        (3.1e-15, "1e-14"),
        (2.7e-15, "1e-14"),
        (1e-9, "1e-09"),
        (1.0000001e-9, "1e-08"),
        (-0.02, "1e-01"),
        (0.0, "0"),
        (7.0, "1e+01"),
    ],
)
def test_power_of_ten_above_is_the_smallest_power_at_or_above_the_size(x, expected):
    assert power_of_ten_above(x) == expected
    if x:
        assert abs(x) <= float(expected) < 10 * abs(x)


@pytest.mark.parametrize("x", [float("nan"), float("inf")])
def test_power_of_ten_above_refuses_what_is_not_finite(x):
    with pytest.raises(ValueError, match="x must be a finite number"):
        power_of_ten_above(x)
