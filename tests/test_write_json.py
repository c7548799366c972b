"""attention_lib.data.paths.write_json: the results files the scripts rewrite as they run."""

import json

import numpy as np
import pytest

from attention_lib.data.paths import write_json


def test_write_json_round_trips_and_makes_its_folder(tmp_path):
    path = tmp_path / "new" / "folder" / "results.json"
    write_json(path, {"loss": [3.1, 2.5], "method": "yarn"})
    text = path.read_text(encoding="utf8")
    assert json.loads(text) == {"loss": [3.1, 2.5], "method": "yarn"}
    assert text.endswith("}\n") and '\n "loss"' in text  # indent 1, final newline


def test_write_json_leaves_the_old_file_whole_when_it_cannot_write(tmp_path):
    path = tmp_path / "results.json"
    write_json(path, {"run": 1})
    with pytest.raises(TypeError, match="not JSON serializable"):
        write_json(path, {"run": 2, "weights": np.zeros(3)})
    assert json.loads(path.read_text(encoding="utf8")) == {"run": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temporary left
