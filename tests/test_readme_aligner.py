"""The README's section on the word aligner shows real output.

The section runs ``python -m attention_lib.align --method em`` on the
Hansards development files and shows line 10 of the inputs and of the links
as comments; this test runs the same aligner and compares.
"""

import io
import shlex
from pathlib import Path

from attention_lib import data_dir
from attention_lib.align.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def section_block():
    section = README.split("## The word aligner on the command line", 1)[1].split("\n## ", 1)[0]
    return section.split("```bash", 1)[1].split("```", 1)[0]


def test_readme_aligner_example_prints_what_the_aligner_prints():
    block = section_block()
    command = block.split("> links.txt", 1)[0].replace("\\\n", " ")
    argv = shlex.split(command)
    assert argv[:3] == ["python", "-m", "attention_lib.align"]
    argv = [
        a.replace("data/", f"{data_dir()}/", 1) if a.startswith("data/") else a for a in argv[3:]
    ]
    out = io.StringIO()
    assert main(argv, stdout=out) == 0
    shown = [line[2:] for line in block.splitlines() if line.startswith("# ")]
    english = (data_dir() / "hansards_trial/trial.en").read_text(encoding="utf-8").splitlines()
    french = (data_dir() / "hansards_trial/trial.fr").read_text(encoding="utf-8").splitlines()
    assert "FNR == 10" in block
    assert shown == [english[9], french[9], out.getvalue().splitlines()[9]]
