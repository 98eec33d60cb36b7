"""The explorer in a real browser: headless Chromium (Debian's ``chromium`` + ``chromium-driver``) via Selenium.

A person's path through it: open the explorer, run a SPARQL query, open the entity from the results, see the
utterance behind a fact, jump to that utterance highlighted in its conversation, search. Screenshots of every
step are kept in ``test-artifacts/explorer/`` (gitignored). Skipped cleanly when Chromium, its driver or Selenium
is absent; ``.ci/run`` installs them.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pcm.namespaces import PREFIXES
from tests.endpoint.test_endpoint_support import build_memory, serving

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "explorer"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
WAIT_S = 20
EDITOR = "#sparql-query .yasqe .CodeMirror"

try:
    from selenium import webdriver
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # pragma: no cover - depends on the machine
    webdriver = None  # type: ignore[assignment]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(webdriver is None, reason="selenium is not installed (pip install selenium)"),
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"),
    pytest.mark.skipif(CHROMEDRIVER is None, reason="chromedriver is not installed (apt-get install chromium-driver)"),
]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = build_memory(tmp_path_factory.mktemp("browser") / "memory")
    with serving(settings) as server:
        yield server.url


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--window-size=1280,1100",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=str(CHROMEDRIVER))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(WAIT_S)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(browser: Any, css: str, text: str | None = None) -> Any:
    wait = WebDriverWait(browser, WAIT_S)
    if text is not None:
        wait.until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, css), text))
    return wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, css)))


def shot(browser: Any, name: str) -> None:
    assert browser.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def set_query(browser: Any, text: str) -> None:
    """Replace the SPARQL editor's text (CodeMirror keeps its instance on its wrapper element)."""
    wait_for(browser, EDITOR)
    browser.execute_script(f"document.querySelector({EDITOR!r}).CodeMirror.setValue(arguments[0])", text)


def editor_text(browser: Any) -> str:
    return str(browser.execute_script(f"return document.querySelector({EDITOR!r}).CodeMirror.getValue()"))


def type_in_editor(browser: Any, keys: str) -> None:
    """Type as a person would: keystrokes to CodeMirror's input at the cursor (focused by a click on the editor)."""
    if "CodeMirror" not in str(browser.execute_script("return document.activeElement.closest('.CodeMirror')?.className")):
        browser.find_element(By.CSS_SELECTOR, EDITOR + " .CodeMirror-lines").click()
        browser.execute_script(f"document.querySelector({EDITOR!r}).CodeMirror.execCommand('goDocEnd')")
    ActionChains(browser).send_keys(keys).perform()


def press_ctrl(browser: Any, key: str) -> None:
    """Ctrl held down while ``key`` is pressed, in the focused editor."""
    ActionChains(browser).key_down(Keys.CONTROL).send_keys(key).key_up(Keys.CONTROL).perform()


# The offers shown and the word before the cursor, read in one script: CodeMirror replaces its hint list as keys
# arrive, so elements found in one call may be gone by the next.
_HINTS_AND_WORD = f"""
const cm = document.querySelector({EDITOR!r}).CodeMirror;
const before = cm.getLine(cm.getCursor().line).slice(0, cm.getCursor().ch);
const items = document.querySelectorAll('#sparql-query .CodeMirror-hints li.CodeMirror-hint');
return [Array.from(items, li => li.textContent), before.split(/\\s/).pop()];
"""


def offered(browser: Any) -> list[str]:
    """The completions the editor shows for the word just typed, once it shows them.

    A list left over from an earlier word (closing while the next keys arrive) is not an answer: the wait ends
    when the editor offers something and every offer continues the word before the cursor, or after ``WAIT_S``
    with whatever is shown then (for the assertion to report).
    """
    seen: list[list[str]] = [[]]

    def settled(b: Any) -> bool:
        items, word = b.execute_script(_HINTS_AND_WORD)
        seen[0] = list(items)
        return bool(items) and all(item.startswith(word) for item in items)

    with contextlib.suppress(TimeoutException):
        WebDriverWait(browser, WAIT_S).until(settled)
    return seen[0]


def test_query_entity_and_the_utterance_behind_a_fact(browser: Any, url: str) -> None:
    browser.get(url + "/")
    wait_for(browser, "#conversations", "Biscuit ate a sock")
    shot(browser, "01-home")

    # run a query in the SPARQL editor
    browser.find_element(By.CSS_SELECTOR, 'nav a[data-nav="sparql"]').click()
    set_query(
        browser,
        "PREFIX pcm: <https://w3id.org/pcm/ontology#>\n"
        "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n"
        "SELECT ?pet ?name WHERE { ?pet a pcm:Pet ; rdfs:label ?name }",
    )
    browser.find_element(By.ID, "run-query").click()
    table = wait_for(browser, "#results table.results", "Biscuit")
    assert "1 row(s)" in browser.find_element(By.ID, "query-status").text
    shot(browser, "02-sparql-results")

    # open the entity from the results
    table.find_element(By.CSS_SELECTOR, "tbody a").click()
    wait_for(browser, "#entity-title", "Biscuit")
    facts = wait_for(browser, "#facts")
    breed = next(row for row in facts.find_elements(By.CSS_SELECTOR, "tr.fact") if "beagle" in row.text)
    source = breed.find_element(By.CSS_SELECTOR, ".source-text")
    assert "He's a four-year-old beagle." in source.text  # the utterance this fact came from
    graph = browser.find_element(By.ID, "graph-view")
    assert len(graph.find_elements(By.TAG_NAME, "circle")) >= 2  # Biscuit and Dana
    shot(browser, "03-entity")

    # follow the fact to its utterance, highlighted in the conversation
    breed.find_element(By.CSS_SELECTOR, "a.in-conversation").click()
    highlighted = wait_for(browser, ".post.highlight")
    assert "four-year-old beagle" in highlighted.text
    assert "pet breed" in highlighted.text  # the fact this turn produced
    assert len(browser.find_elements(By.CSS_SELECTOR, ".post")) == 10
    shot(browser, "04-conversation")


def test_sparql_editor_highlights_and_completes_the_memory_prefixes(browser: Any, url: str) -> None:
    browser.get(url + "/#/sparql")
    set_query(browser, "PREFIX sioc: <http://rdfs.org/sioc/ns#>\nSELECT ?post WHERE { ?post a sioc:Post } LIMIT 5")
    editor = wait_for(browser, EDITOR)
    keywords = {span.text for span in editor.find_elements(By.CSS_SELECTOR, ".CodeMirror-code span.cm-keyword")}
    assert {"PREFIX", "SELECT", "WHERE", "LIMIT"} <= keywords  # the SPARQL mode tokenised the text
    assert "sioc:Post" in {span.text for span in editor.find_elements(By.CSS_SELECTOR, "span.cm-string-2")}

    # after PREFIX, typing the start of a name offers the memory's prefixes (and only those: no stock list)
    set_query(browser, "")
    type_in_editor(browser, "PREFIX s")
    known = {**PREFIXES, "m": httpx.get(url + "/api/info").json()["namespace"]}
    assert offered(browser) == sorted(f"{p}: <{iri}>" for p, iri in known.items() if p.startswith("s"))
    shot(browser, "06-sparql-prefix-completion")
    type_in_editor(browser, Keys.ENTER)  # take the first offer
    assert editor_text(browser) == f"PREFIX schema: <{PREFIXES['schema']}>"

    # using an undeclared prefix declares it; classes and properties come from the memory's own ontology
    set_query(browser, "")
    type_in_editor(browser, "SELECT ?pet ?breed WHERE { ?pet a pcm:")
    WebDriverWait(browser, WAIT_S).until(lambda b: f"PREFIX pcm: <{PREFIXES['pcm']}>" in editor_text(b))
    type_in_editor(browser, "Pe")
    assert offered(browser) == ["pcm:Pet"]
    shot(browser, "07-sparql-class-completion")
    type_in_editor(browser, Keys.ENTER)
    type_in_editor(browser, " ; pcm:petB")
    assert offered(browser) == ["pcm:petBreed"]
    type_in_editor(browser, Keys.ENTER)
    type_in_editor(browser, " ?breed }")
    assert editor_text(browser).endswith("SELECT ?pet ?breed WHERE { ?pet a pcm:Pet ; pcm:petBreed ?breed }")

    # Ctrl+Enter runs the query from the editor
    press_ctrl(browser, Keys.ENTER)
    wait_for(browser, "#results table.results", "beagle")
    assert "1 row(s)" in browser.find_element(By.ID, "query-status").text
    shot(browser, "08-sparql-editor-results")


def test_search_box(browser: Any, url: str) -> None:
    browser.get(url + "/")
    box = wait_for(browser, "#search-box")
    box.send_keys("Alvarez")
    browser.find_element(By.CSS_SELECTOR, "#search-form button").click()
    hits = wait_for(browser, "#utterance-hits", "Dr. Alvarez at Sellwood Animal Clinic")
    assert "Dr. Alvarez" in browser.find_element(By.ID, "entity-hits").text
    shot(browser, "05-search")
    hits.find_element(By.CSS_SELECTOR, "a.in-conversation").click()
    assert "Alvarez" in wait_for(browser, ".post.highlight").text


def test_no_errors_in_the_browser_console(browser: Any, url: str) -> None:
    browser.get(url + "/#/sparql")
    wait_for(browser, EDITOR)
    browser.find_element(By.ID, "run-query").click()
    wait_for(browser, "#results table")
    # completing a class and a property asks nothing of other origins (the CSP would refuse it, loudly)
    set_query(browser, f"PREFIX pcm: <{PREFIXES['pcm']}>\nSELECT * WHERE {{ ?s a pcm:P")
    type_in_editor(browser, "e")
    assert "pcm:Pet" in offered(browser)
    type_in_editor(browser, " ; pcm:has")
    assert "pcm:hasPet" in offered(browser)
    severe = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
    assert severe == []
