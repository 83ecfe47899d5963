"""The README is a front door (issue 22 item 5): short, and every page it leaves out is one link away.

Also: every relative link in README.md and docs/*.md reaches a file (and a heading, when it names one), and
every environment variable the package reads is in docs/configuration.md's table.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jenkins_dispatch.config import ENVIRONMENT

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
MAX_README_LINES = 300

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
# [text](target) and ![alt](target); the text may wrap onto the next line.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def prose(text: str) -> str:
    """The text without fenced blocks and inline code, where brackets and parentheses are not links."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (hyphens and underscores kept), spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading anchors on its text
    text = re.sub(r"[^\w\- ]", "", text.replace("`", "").lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, with GitHub's -1, -2 … for repeated headings."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    return [target for target in LINK.findall(prose(path.read_text()))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE)]  # http:, https:, mailto: …


@pytest.mark.parametrize("heading, expected", [
    ("The guarantee", "the-guarantee"),
    ("`serve`: all of it in one process", "serve-all-of-it-in-one-process"),
    ("MySQL 8 and MariaDB 10.6+", "mysql-8-and-mariadb-106"),
    ("Jenkins as a whole: the breaker", "jenkins-as-a-whole-the-breaker"),
    ("MySQL, Aurora MySQL and MariaDB", "mysql-aurora-mysql-and-mariadb"),
])
def test_slug_is_github_s_anchor(heading, expected):
    assert slug(heading) == expected


def test_the_readme_is_at_most_300_lines():
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines: move detail into docs/ and link it"


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_its_heading(page):
    broken = []
    for target in relative_links(page):
        file_part, _, anchor = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        if not linked.exists():
            broken.append(f"{target}: no file {linked.relative_to(ROOT) if linked.is_relative_to(ROOT) else linked}")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading with anchor #{anchor} in {linked.relative_to(ROOT)}")
    assert broken == [], f"{page.name}:\n" + "\n".join(broken)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in relative_links(README)}
    missing = [page.name for page in DOCS if page.resolve() not in linked]
    assert missing == [], f"docs/ pages the README does not link: {missing}"


def test_every_environment_variable_is_in_the_configuration_table():
    text = (ROOT / "docs" / "configuration.md").read_text()
    table = [line for line in text.splitlines() if line.startswith("| `")]
    documented = {name for line in table for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", line.split("|")[1])}
    missing = [variable.name for variable in ENVIRONMENT if variable.name not in documented]
    assert missing == [], f"config.ENVIRONMENT variables missing from docs/configuration.md's table: {missing}"


def test_the_link_checker_finds_a_broken_link_and_a_missing_heading(tmp_path):
    (tmp_path / "other.md").write_text("# Title\n\n## A `code` heading: yes\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#a-code-heading-yes) [gone](missing.md) [bad](other.md#nope)\n"
                    "```\n[not a link](nowhere.md)\n```\n`[nor this](nowhere.md)` [web](https://example.com/x)\n")
    targets = relative_links(page)
    assert targets == ["other.md#a-code-heading-yes", "missing.md", "other.md#nope"]
    assert anchors(tmp_path / "other.md") == {"title", "a-code-heading-yes"}
