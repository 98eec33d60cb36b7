"""`pcm ontology docs`: the HTML and Markdown reference, and a headless Chromium screenshot of it."""

from __future__ import annotations

import re
import subprocess
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from pcm.cli_ontology import ontology as ontology_cli
from pcm.ontology import Ontology, load_ontology
from pcm.ontology_tools.docs import anchor, collect_examples, write_docs

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")


class _Page(HTMLParser):
    """Collects ids and internal links, and checks that every opened element is closed."""

    VOID = {"meta", "br", "img", "link", "hr", "input"}

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: set[str] = set()
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(values["id"] or "")
        href = values.get("href") or ""
        if href.startswith("#"):
            self.links.add(href[1:])
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else '-'}>")
        else:
            self.stack.pop()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, onto: Ontology) -> Path:
    out = tmp_path_factory.mktemp("docs")
    write_docs(onto, out)
    return out


def test_html_documents_every_term_and_its_links_resolve(site: Path, onto: Ontology) -> None:
    page = _Page()
    page.feed((site / "index.html").read_text(encoding="utf-8"))
    assert page.errors == [] and page.stack == []
    assert {anchor(onto.curie(i)) for i in onto.terms} <= page.ids
    assert page.links <= page.ids, sorted(page.links - page.ids)[:5]


def test_html_shows_hierarchy_domain_range_and_examples(site: Path) -> None:
    text = (site / "index.html").read_text(encoding="utf-8")
    section = text[text.index('id="pcm-hasPet"') :]
    section = section[: section.index("</section>")]
    assert 'href="#schema-owns"' in section and 'href="#schema-Person"' in section and 'href="#pcm-Pet"' in section
    assert "m:owner pcm:hasPet" in section  # the example comes from a competency fixture
    assert "What pets do I have" in section
    tree = text[text.index('id="hierarchy"') : text.index('id="area-people"')]
    assert tree.index("schema-Vehicle") < tree.index("pcm-Bicycle")


def test_markdown_has_a_heading_per_term_and_the_namespaces(site: Path, onto: Ontology) -> None:
    text = (site / "ontology.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^#### (\S+)$", text, re.MULTILINE))
    assert headings == {onto.curie(i) for i in onto.terms}
    assert "| `schema:` | <https://schema.org/> |" in text
    assert f"- Version: {onto.version}" in text
    assert "```turtle" in text


def test_examples_come_from_competency_fixtures(onto: Ontology) -> None:
    examples = collect_examples(onto)
    name, statement = examples.snippets["https://w3id.org/pcm/ontology#petSpecies"]
    assert "pcm:petSpecies" in statement and statement.rstrip().endswith(".")
    assert ("pets", "What pets do I have, and what species and breed are they?") in examples.questions[
        "https://w3id.org/pcm/ontology#petSpecies"
    ]


def test_cli_docs_writes_the_chosen_formats(tmp_path: Path) -> None:
    result = CliRunner().invoke(ontology_cli, ["docs", "-o", str(tmp_path / "out"), "--format", "md"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["ontology.md"]


@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is not installed (apt-get install chromium)")
@pytest.mark.browser
def test_docs_open_in_headless_chromium(site: Path, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "ontology-docs.png"
    shot.unlink(missing_ok=True)
    command = [
        str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1280,1600", f"--screenshot={shot}", (site / "index.html").as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 1600)
    assert len(data) > 20_000  # a rendered page, not a blank one


def test_docs_are_reproducible_with_search_property_tree_and_shacl_rules(tmp_path: Path) -> None:
    onto = load_ontology()
    first = {p.name: p.read_bytes() for p in write_docs(onto, tmp_path / "a")}
    second = {p.name: p.read_bytes() for p in write_docs(onto, tmp_path / "b")}
    assert first == second
    md, page = first["ontology.md"].decode(), first["index.html"].decode()
    today = datetime.now(UTC).date().isoformat()
    assert today not in md and today not in page  # no build time: the same ontology gives the same files
    assert f"- Content digest: `{onto.digest}`" in md
    assert "## Property hierarchy" in md
    tree = md[md.index("## Property hierarchy"):]
    owns = tree.index("- [`schema:owns`](#schema-owns)")
    assert tree.index("  - [`pcm:hasPet`](#pcm-hasPet)", owns) > owns
    assert "- SHACL rule `single-valued`: a person has one current home" in md
    assert 'id="search"' in page and "<script>" in page and "section.term" in page
    assert 'version IRI <a href="https://w3id.org/pcm/ontology/0.1.0">' in page
    assert '<h2 id="property-hierarchy">Property hierarchy</h2>' in page
