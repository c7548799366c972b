"""Publishing settings derive from the one repository URL in _config.yml.

GitHub Pages serves the book at https://<owner>.github.io/<repo>/ for the
repository https://github.com/<owner>/<repo>; Jupyter Book cannot derive
html.baseurl from repository.url itself, so these tests keep the two (and the
README's badges) in step when the URL changes.
"""

import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
README = (ROOT / "README.md").read_text(encoding="utf-8")


def owner_repo(url):
    """``("owner", "repo")`` of a https://github.com/<owner>/<repo> URL."""
    parsed = urlparse(url)
    parts = parsed.path.strip("/").split("/")
    if parsed.scheme != "https" or parsed.netloc != "github.com" or len(parts) != 2:
        raise ValueError(f"repository.url must be https://github.com/<owner>/<repo>, got {url!r}")
    return parts[0], parts[1].removesuffix(".git")


def pages_url(url):
    owner, repo = owner_repo(url)
    if repo.lower() == f"{owner.lower()}.github.io":  # a user or organisation site
        return f"https://{owner.lower()}.github.io/"
    return f"https://{owner.lower()}.github.io/{repo}/"


REPO_URL = CONFIG["repository"]["url"]
BRANCH = CONFIG["repository"]["branch"]


def test_pages_url_follows_github_rules():
    assert pages_url("https://github.com/Ada/attention") == "https://ada.github.io/attention/"
    assert pages_url("https://github.com/ada/ada.github.io") == "https://ada.github.io/"
    with pytest.raises(ValueError, match="repository.url"):
        pages_url("https://gitlab.com/ada/attention")


def test_html_baseurl_is_the_github_pages_url_of_the_repository():
    assert CONFIG["html"]["baseurl"] == pages_url(REPO_URL), (
        "_config.yml: html.baseurl must be the GitHub Pages URL of repository.url; "
        f"set it to {pages_url(REPO_URL)}"
    )


def test_sitemap_lists_pages_under_the_baseurl():
    config = CONFIG["sphinx"]["config"]
    assert "sphinx_sitemap" in config["extensions"]
    # "{link}" alone: no language or version folder between baseurl and book/x.html
    assert config["sitemap_url_scheme"] == "{link}"


def readme_badges():
    """``[(image URL, link URL), ...]`` of the badges line under the README's title."""
    line = next(l for l in README.splitlines() if l.startswith("[!["))
    return re.findall(r"\[!\[[^\]]*\]\(([^)]+)\)\]\(([^)]+)\)", line)


def test_readme_badges_are_built_from_the_repository_url():
    owner, repo = owner_repo(REPO_URL)
    slug = f"{owner}/{repo}"
    expected = [
        (
            f"https://github.com/{slug}/actions/workflows/test.yml/badge.svg?branch={BRANCH}",
            f"https://github.com/{slug}/actions/workflows/test.yml",
        ),
        ("https://img.shields.io/badge/read-the%20book-blue", pages_url(REPO_URL)),
        (
            "https://mybinder.org/badge_logo.svg",
            f"https://mybinder.org/v2/gh/{slug}/{BRANCH}?urlpath=lab/tree/book",
        ),
        (
            "https://colab.research.google.com/assets/colab-badge.svg",
            f"https://colab.research.google.com/github/{slug}/blob/{BRANCH}/book/01_bottleneck.ipynb",
        ),
    ]
    assert readme_badges() == expected


def test_readme_badge_workflow_and_notebook_exist():
    assert (ROOT / ".github/workflows/test.yml").is_file()
    assert (ROOT / "book/01_bottleneck.ipynb").is_file()


def test_quick_start_is_two_commands():
    block = README.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    assert block.strip().splitlines() == ["bash scripts/build-book.sh", "bash scripts/run-tests.sh"]


def test_newest_releases_workflow_runs_weekly_on_the_newest_python():
    """Environment rot: a weekly job runs the chapters on unpinned releases (issue 20)."""
    workflow = yaml.safe_load((ROOT / ".github/workflows/newest.yml").read_text(encoding="utf-8"))
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert "workflow_dispatch" in triggers
    assert re.fullmatch(r"\d+ \d+ \* \* [0-6]", triggers["schedule"][0]["cron"])  # weekly
    steps = workflow["jobs"]["newest"]["steps"]
    versions = [s["with"]["python-version"] for s in steps if "setup-python" in s.get("uses", "")]
    assert versions and float(versions[0]) >= 3.13
    assert any("scripts/check-newest.sh" in s.get("run", "") for s in steps)
    script = (ROOT / "scripts/check-newest.sh").read_text(encoding="utf-8")
    assert "numpy|scipy|matplotlib|altair" in script  # the four it unpins
