"""Figures live in one place (issue 48): a figure in the docs is one its source holds.

A paragraph, list item or table row of README.md, docs/*.md or docs/upstream/*.md that links to or names a results
file (a drill's or a chaos run's under tests/drills/results/, a benchmark's under benchmarks/results/ or
tests/benchmarks/results/, or benchmarks/RESULTS.md) is bound to it, and every number in it that looks like a
measurement must be found in at least one of the files it names. A number looks like a measurement when it has a
decimal point or a thousands separator, or is an integer of three digits or more; small integers (counts of runs,
"2 x 2", "5 s" bounds) are not checked, nor is anything in a code span, a link target or an HTML comment. A number
is found when a value of the source rounds to it at the doc's precision (3.6 matches 3.61; 4,470 matches 4469.9),
ignoring signs; a percentage may also be a ratio of the source times 100, and a duration in s a source's ms (or in
ms a source's s). A JSON source holds its numeric values and the numbers in its strings; RESULTS.md the numbers in
its text.

Where a bound paragraph holds a figure its source cannot (from a run no results file records, or computed from the
source's figures), the paragraph says so in an HTML comment, by convention at the end of the figure's line:
`<!-- not in the results: 6988 9.2 (the partition drill records no file) -->` exempts exactly the numbers it lists
outside brackets, in that paragraph only, and each must be one of the paragraph's figures.
"""

from __future__ import annotations

import bisect
import dataclasses
import fnmatch
import functools
import json
import re
from pathlib import Path

import pytest

# tests/support/estate.py's REPO_ROOT may resolve to the checkout the collection is installed from: the docs under
# test are those beside this file.
REPO_ROOT = Path(__file__).resolve().parents[2]

RESULT_DIRECTORIES = ("tests/drills/results", "tests/benchmarks/results", "benchmarks/results")
RESULTS_PAGE = "benchmarks/RESULTS.md"

# A results path as the docs write it: a file, a glob (`runtime_queues_*.json`, `chaos/<estate>-seed<seed>.json`),
# or a directory.
RESULT_PATH = re.compile(r"(?:tests/drills/results|tests/benchmarks/results|benchmarks/results)"
                         r"(?:/(?:\{[^}\s]*\}|[^\s`)\]'\";,{])*)?|benchmarks/RESULTS\.md")
# A result file named without its directory (`upgrade_2x2.json`, `bridge_engine_ha_{2x2,3x2}.json`).
RESULT_NAME = re.compile(r"(?:(?<=[\s`(\[])|^)([\w*{}<>,.-]+\.json)\b")
EXEMPTION = re.compile(r"<!--\s*not in the results:(.*?)-->", re.S)
BRACKETED = re.compile(r"\([^()]*\)")

CODE_SPAN = re.compile(r"`[^`]*`")
HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
LINK_TARGET = re.compile(r"\]\([^)]*\)")
URL = re.compile(r"https?://\S+")
DATE_OR_TIME = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?|\b\d{1,2}:\d{2}\b")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
# The unit may follow a bracketed second figure: "468.4 (363.7) ms".
UNIT = re.compile(r"\)?\s?(?:\([^()]*\)\s?)?(%|ms\b|s\b)")


@dataclasses.dataclass(frozen=True)
class Figure:
    """A number as a doc (or a source) writes it."""
    text: str
    value: float
    decimals: int
    unit: str  # "%", "s", "ms" or ""
    line: int = 0

    @property
    def looks_measured(self) -> bool:
        return "." in self.text or "," in self.text or len(self.text) >= 3


@dataclasses.dataclass
class Block:
    """A paragraph, list item, table row or heading: the unit a citation binds."""
    first_line: int
    lines: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclasses.dataclass(frozen=True)
class Offence:
    """What is wrong at a line of a doc: a figure its sources do not hold, a broken citation or exemption."""
    doc: str
    line: int
    subject: str
    problem: str

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.subject} {self.problem}"


def blocks_of(markdown: str) -> list[Block]:
    """The paragraphs, list items, table rows and headings of a markdown text; code blocks left out."""
    blocks: list[Block] = []
    current: Block | None = None
    in_fence = False
    in_indented_code = False
    for number, line in enumerate(markdown.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("```"):
            in_fence, current = not in_fence, None
            continue
        if in_fence:
            continue
        if not stripped:
            current, in_indented_code = None, False
            continue
        starts_item = re.match(r"\s*(?:[-*]|\d+\.)\s", line) is not None
        if current is None and line.startswith("    ") and not starts_item:
            in_indented_code = True
        if in_indented_code:
            continue
        after_row = current is not None and current.lines[-1].lstrip().startswith("|")
        if current is None or starts_item or after_row or stripped.startswith(("|", "#")):
            current = Block(number, [])
            blocks.append(current)
        current.lines.append(line)
    return blocks


def _expand_braces(pattern: str) -> list[str]:
    match = re.search(r"\{([^{}]*)\}", pattern)
    if not match:
        return [pattern]
    return [expanded for choice in match.group(1).split(",")
            for expanded in _expand_braces(pattern[:match.start()] + choice + pattern[match.end():])]


def _as_glob(pattern: str) -> str:
    return re.sub(r"<[^>]*>", "*", pattern)


def all_result_files(repo_root: Path) -> list[Path]:
    files = [path for directory in RESULT_DIRECTORIES for path in sorted((repo_root / directory).rglob("*.json"))]
    return files + ([repo_root / RESULTS_PAGE] if (repo_root / RESULTS_PAGE).exists() else [])


def cited_sources(text: str, repo_root: Path) -> tuple[list[Path], list[str]]:
    """The result files a block's text names (by path, glob, directory or bare file name), and the paths it names
    that match no file."""
    sources: list[Path] = []
    missing: list[str] = []
    for cited in RESULT_PATH.findall(text):
        matched = []
        for pattern in _expand_braces(_as_glob(cited.rstrip("."))):
            target = repo_root / pattern
            if target.is_dir():
                matched += sorted(target.rglob("*.json"))
            else:
                matched += sorted(path for path in repo_root.glob(pattern) if path.is_file())
        sources += matched
        if not matched:
            missing.append(cited)
    result_files = all_result_files(repo_root)
    for name in RESULT_NAME.findall(text):
        for pattern in _expand_braces(_as_glob(name)):
            sources += [path for path in result_files if fnmatch.fnmatch(path.name, pattern)]
    return sorted(set(sources)), missing


def _blank(match: re.Match) -> str:
    """Blank out what a pattern matched, keeping line breaks (so that line numbers stay right)."""
    return re.sub(r"[^\n]", " ", match.group())


def numbers_in(text: str) -> list[Figure]:
    """The numbers a text writes as quantities: not parts of names (dc1, p99, B8, 5c488b7, ARTEMIS-4651), versions
    (2.56.0), addresses, ports, issue numbers, dates or times. Line numbers count from 1 in the text."""
    text = DATE_OR_TIME.sub(_blank, text)
    figures = []
    for match in NUMBER.finditer(text):
        token, start, end = match.group(), match.start(), match.end()
        before = text[start - 1] if start else " "
        before_that = text[start - 2] if start > 1 else " "
        after = text[end] if end < len(text) else " "
        if before.isalnum() or before in "_#:/$=.@" or (before == "-" and before_that.isalpha()):
            continue
        if after.isalpha() or after == "_":
            continue
        if token.count(".") > 1 or not THOUSANDS.fullmatch(token):
            continue
        if re.search(r"\bports?\s$", text[max(0, start - 6):start]):
            continue
        unit = UNIT.match(text, end)
        fraction = token.partition(".")[2]
        figures.append(Figure(token, float(token.replace(",", "")), len(fraction), unit.group(1) if unit else "",
                              text.count("\n", 0, start) + 1))
    return figures


def _json_numbers(value) -> list[float]:
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float)):
        return [abs(float(value))]
    if isinstance(value, str):
        return [figure.value for figure in numbers_in(value)]
    if isinstance(value, dict):
        return [number for item in value.values() for number in _json_numbers(item)]
    return [number for item in value for number in _json_numbers(item)]


@functools.lru_cache(maxsize=None)
def source_numbers(path: Path) -> list[float]:
    """Every number a result file holds, sorted."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return sorted(_json_numbers(json.loads(text)))
    return sorted(figure.value for figure in numbers_in(text))


def _holds_within(numbers: list[float], low: float, high: float) -> bool:
    index = bisect.bisect_left(numbers, low)
    return index < len(numbers) and numbers[index] <= high


def holds(numbers: list[float], figure: Figure) -> bool:
    """Whether a source's numbers hold a doc's figure, at the doc's precision."""
    tolerance = 0.5 * 10 ** -figure.decimals + 1e-9
    low, high = figure.value - tolerance, figure.value + tolerance
    scales = [1.0] + {"%": [100.0], "s": [1 / 1000], "ms": [1000.0]}.get(figure.unit, [])
    return any(_holds_within(numbers, low / scale, high / scale) for scale in scales)


def exempted_figures(block_text: str) -> set[str]:
    """The numbers a paragraph's `<!-- not in the results: ... -->` comments list (bracketed text explains)."""
    return {figure.text for listed in EXEMPTION.findall(block_text)
            for figure in numbers_in(BRACKETED.sub(_blank, listed))}


def checked_figures(doc: Path, repo_root: Path) -> tuple[list[tuple[Figure, list[Path]]], list[Offence]]:
    """The figures of a doc in paragraphs that name a source, each with its sources; and what is wrong with the
    citations and exemptions themselves."""
    relative = doc.relative_to(repo_root).as_posix()
    checked, offences = [], []
    for block in blocks_of(doc.read_text(encoding="utf-8")):
        sources, missing = cited_sources(block.text, repo_root)
        offences += [Offence(relative, block.first_line, path, "is cited but matches no file") for path in missing]
        exempt = exempted_figures(block.text)
        prose = block.text
        for pattern in (HTML_COMMENT, CODE_SPAN, LINK_TARGET, URL):
            prose = pattern.sub(_blank, prose)
        figures = [dataclasses.replace(figure, line=block.first_line + figure.line - 1)
                   for figure in numbers_in(prose) if figure.looks_measured]
        # An exemption left behind by an edit would hide the next drift of the same number.
        stale = exempt - {figure.text for figure in figures} if sources else exempt
        offences += [Offence(relative, block.first_line, text,
                             "is exempted but is no figure of a paragraph that names a results file")
                     for text in sorted(stale)]
        if sources:
            checked += [(figure, sources) for figure in figures if figure.text not in exempt]
    return checked, offences


def unheld_figures(doc: Path, repo_root: Path = REPO_ROOT) -> list[Offence]:
    """Every figure of a doc that none of its cited sources holds, and every broken citation or exemption."""
    relative = doc.relative_to(repo_root).as_posix()
    checked, offences = checked_figures(doc, repo_root)
    for figure, sources in checked:
        if not any(holds(source_numbers(source), figure) for source in sources):
            names = ", ".join(source.relative_to(repo_root).as_posix() for source in sources)
            offences.append(Offence(relative, figure.line, figure.text + (f" {figure.unit}" if figure.unit else ""),
                                    f"is in none of {names}"))
    return offences


DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md")),
        *sorted((REPO_ROOT / "docs" / "upstream").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.relative_to(REPO_ROOT).as_posix())
def test_every_figure_of_a_doc_is_held_by_the_source_it_names(doc):
    offences = unheld_figures(doc)
    assert not offences, "\n".join(str(offence) for offence in offences)


def test_the_docs_bind_figures_to_their_sources():
    """Guards the rule itself: were the citations no longer recognised, every doc would pass checking nothing."""
    checked = {doc: checked_figures(doc, REPO_ROOT)[0] for doc in DOCS}
    assert sum(len(figures) for figures in checked.values()) >= 40, {
        doc.name: len(figures) for doc, figures in checked.items()}
    assert checked[REPO_ROOT / "docs" / "engines.md"], "docs/engines.md cites active_active_2x1.json and B8"


# The rule on a hand-made estate of one doc and one result file.

FIXTURE_RESULT = {"accepted": 48219, "mean_ms": 468.43, "p99_ms": 3579.1, "ratio": 0.0621,
                  "note": "took 36.4 s at 500 msg/s"}


def _fixture(tmp_path: Path, markdown: str) -> Path:
    results = tmp_path / "tests" / "drills" / "results"
    results.mkdir(parents=True)
    (results / "drill.json").write_text(json.dumps(FIXTURE_RESULT))
    doc = tmp_path / "docs" / "drill.md"
    doc.parent.mkdir()
    doc.write_text(markdown)
    return doc


def test_a_figure_its_source_does_not_hold_is_reported_with_its_line_and_sources(tmp_path):
    doc = _fixture(tmp_path, "# Drill\n\nThe drill (`tests/drills/results/drill.json`) accepted\n"
                             "48,291 messages, mean 468.4 ms.\n")
    assert [str(offence) for offence in unheld_figures(doc, tmp_path)] == [
        "docs/drill.md:4: 48,291 is in none of tests/drills/results/drill.json"]


def test_a_figure_rounded_or_in_other_units_is_held(tmp_path):
    doc = _fixture(tmp_path, "Figures: [drill.json](../tests/drills/results/drill.json). 48,219 accepted, mean\n"
                             "468 ms (468.4), p99 3.58 s, 6.2 % apart, 36.4 s at 500 msg/s; seeds 1 to 15, 2 x 2,\n"
                             "Artemis 2.56.0 on port 61616 since 2026-11-26, commit 5c488b7, ARTEMIS-4651.\n")
    checked, _offences = checked_figures(doc, tmp_path)
    assert [figure.text for figure, _sources in checked] == ["48,219", "468", "468.4", "3.58", "6.2", "36.4", "500"]
    assert not unheld_figures(doc, tmp_path)


def test_a_figure_in_a_paragraph_without_a_source_is_not_checked(tmp_path):
    doc = _fixture(tmp_path, "Figures: `tests/drills/results/drill.json`.\n\n"
                             "Another run accepted 12,345 messages.\n\n"
                             "| run | accepted |\n|---|---|\n| one | 54,321 |\n| `drill.json` | 48,219 |\n")
    checked, _offences = checked_figures(doc, tmp_path)
    assert [figure.text for figure, _sources in checked] == ["48,219"]
    assert not unheld_figures(doc, tmp_path)


def test_a_figure_its_paragraph_declares_not_in_the_results_is_exempt_there_only(tmp_path):
    doc = _fixture(tmp_path, "The drill (`drill.json`) accepted 48,219; another bed accepted 6988\n"
                             "in 9.2 s (49.1 at most). <!-- not in the results: 6988 9.2 (another bed, 1.5 runs) -->\n"
                             "\n"
                             "The drill (`drill.json`) again: 6988.\n")
    assert [str(offence) for offence in unheld_figures(doc, tmp_path)] == [
        "docs/drill.md:2: 49.1 is in none of tests/drills/results/drill.json",
        "docs/drill.md:4: 6988 is in none of tests/drills/results/drill.json"]


def test_an_exemption_of_no_figure_of_its_paragraph_is_reported(tmp_path):
    doc = _fixture(tmp_path, "The drill (`drill.json`) accepted 48,219. <!-- not in the results: 6988 -->\n")
    assert [str(offence) for offence in unheld_figures(doc, tmp_path)] == [
        "docs/drill.md:1: 6988 is exempted but is no figure of a paragraph that names a results file"]


def test_a_cited_results_path_that_does_not_exist_is_reported(tmp_path):
    doc = _fixture(tmp_path, "Figures in `tests/drills/results/gone.json`: 1,234.\n")
    assert [str(offence) for offence in unheld_figures(doc, tmp_path)] == [
        "docs/drill.md:1: tests/drills/results/gone.json is cited but matches no file"]
