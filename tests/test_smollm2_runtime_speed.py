"""The SmolLM2 runtime's recorded speed (data/smollm2/runtime_speed.json) names issue 55's figures.

``scripts/record_smollm2_js_speed.py`` writes the node figures and
``scripts/browser_smollm2.py --json`` the Chromium ones; here the record is read as the
project's checks read it: each figure by its name, with the command and the load average
it was measured at, and the issue's goals held (at least 15 tokens per second on one
thread, at most 1.0x the library's ms per token, under 300 MB held for the model).
"""

import json
from pathlib import Path

RECORD = Path(__file__).resolve().parents[1] / "data" / "smollm2" / "runtime_speed.json"


def test_the_node_figures_are_recorded_by_name_and_meet_the_goals():
    node = json.loads(RECORD.read_text(encoding="utf8"))["node"]
    assert node["same_ids_as_the_library"] is True
    assert node["command"].startswith("python scripts/record_smollm2_js_speed.py")
    assert len(node["load_average_before"]) == len(node["load_average_after"]) == 3
    assert node["smollm2_js_tokens_per_s"] >= 15, "fewer than 15 tokens per second"
    assert node["smollm2_js_ms_per_token_ratio"] <= 1.0, "slower than the library"
    assert 0 < node["smollm2_js_page_mib"] < 300 / 1.048576, "300 MB or more held"


def test_the_chromium_speed_is_recorded_at_both_widths_with_its_load():
    chromium = json.loads(RECORD.read_text(encoding="utf8"))["chromium"]
    rates = chromium["smollm2_js_chromium_tokens_per_s"]
    assert sorted(rates) == ["1280px", "390px"]
    assert all(r > 0 for r in rates.values())
    assert chromium["command"].startswith("python scripts/browser_smollm2.py --json")
    assert len(chromium["load_average_after"]) == 3
