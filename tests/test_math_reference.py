"""The mathematical reference (jaxpriv/MATH.md) ships with the package, every "MATH §x.y" citation in the code,
docs, benchmarks, notebooks and tests names a section it has, and :func:`jaxpriv.math_reference` returns
sections and rejects bad input."""

import importlib.resources
import pathlib
import re
import subprocess
import sys
import tomllib

import pytest

import jaxpriv
from jaxpriv import _reference

ROOT = pathlib.Path(__file__).resolve().parents[1]
MATH = ROOT / "jaxpriv" / "MATH.md"

# "MATH §3.1", "MATH §1.5, §5, §6", "MATH §3.1-3.2", "MATH §5–§6", "MATH §1.1-1.2, §4.3"
_NUM = r"\d+(?:\.\d+)*"
_ITEM = rf"§{_NUM}(?:\s*[-–]\s*§?{_NUM})?"
CITATION = re.compile(rf"MATH ({_ITEM}(?:\s*,\s*{_ITEM})*)")
OLD = "SP" + "EC"  # the old citation prefix, spelled so that this file does not match itself
HEADING = re.compile(r"^#{2,3} (\d+(?:\.\d+)?)\.? +\S", re.MULTILINE)


def _sections_in_document() -> list[str]:
    """Section numbers parsed from the headings of the source file (independently of jaxpriv._reference)."""
    return HEADING.findall(MATH.read_text(encoding="utf-8"))


def _citing_files() -> list[pathlib.Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for folder, patterns in (("jaxpriv", ("*.py", "*.md")), ("tests", ("*.py",)), ("bench", ("*.py", "*.md")),
                             ("notebooks", ("*.ipynb", "*.md"))):
        for pattern in patterns:
            files += sorted(p for p in (ROOT / folder).rglob(pattern) if ".ipynb_checkpoints" not in p.parts)
    return files


def _citations() -> list[tuple[str, str]]:
    """(file:line, cited section number) for every section number of every "MATH §…" citation."""
    found = []
    for path in _citing_files():
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in CITATION.finditer(line):
                for number in re.findall(_NUM, match.group(1)):
                    found.append((f"{path.relative_to(ROOT)}:{lineno}", number))
    return found


# --------------------------------------------------------------------------------------------------
# The document: its sections, and every citation of it
# --------------------------------------------------------------------------------------------------


def test_document_keeps_the_numbering_the_citations_use():
    sections = _sections_in_document()
    assert len(sections) == len(set(sections)), "a section number is used twice"
    required = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
                *(f"0.{i}" for i in range(1, 7)), *(f"1.{i}" for i in range(1, 9)), "3.1", "3.2", "3.3",
                "4.1", "4.2", "4.3", *(f"7.{i}" for i in range(1, 6))}
    assert required <= set(sections), sorted(required - set(sections))
    # in document order: every subsection follows its own section
    assert [s for s in sections if "." not in s] == [str(i) for i in range(13)]  # §10 auditing, §11 allocation, §12 mf
    for number in sections:
        if "." in number:
            parent = number.split(".")[0]
            assert sections.index(parent) < sections.index(number)


def test_every_citation_names_a_section_of_the_document():
    citations = _citations()
    assert len(citations) > 250  # the code cites the reference everywhere: the pattern must find them
    sections = set(_sections_in_document())
    missing = [(where, number) for where, number in citations if number not in sections]
    assert not missing, f"citations of sections MATH.md does not have: {missing[:20]}"


def test_citation_pattern_reads_lists_and_ranges():
    text = "(MATH §1.5, §5, §6) and MATH §3.1-3.2; MATH §5–§6, seed 004 §7.2; MATH §4.1. Then 10 users"
    numbers = [n for m in CITATION.finditer(text) for n in re.findall(_NUM, m.group(1))]
    assert numbers == ["1.5", "5", "6", "3.1", "3.2", "5", "6", "4.1"]


def test_no_citation_of_the_old_unshipped_contract():
    """The formulas used to be cited from a contract outside the package; nothing may point there now."""
    stale = [f"{p.relative_to(ROOT)}:{i}" for p in _citing_files()
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if OLD + " §" in line or OLD + ".md" in line]
    assert not stale, stale


def test_reference_keys_are_all_listed():
    """Every bracketed key cited in the text ([FMT22], [Mir17], …) has an entry in §9 References."""
    text = MATH.read_text(encoding="utf-8")
    body, references = text.split("\n## 9. References\n")
    cited = set(re.findall(r"\[([A-Za-z]+\d{2})\]", body))
    listed = set(re.findall(r"^- \[([A-Za-z]+\d{2})\]", references, re.MULTILINE))
    assert len(cited) >= 15
    assert cited <= listed, sorted(cited - listed)


def test_seed_papers_are_defined_with_their_citations():
    seeds = jaxpriv.math_reference("8")
    assert "the five papers jaxpriv started from" in seeds
    for number in range(5):
        assert f"### 8.{number + 1} Seed 00{number}" in seeds
    for arxiv in ("2304.05516", "2407.14710", "2312.14388", "2401.16251"):
        assert f"arXiv:{arxiv}" in seeds
    assert "AAAI 2023" in seeds and "ACM CCS 2024" in seeds


# --------------------------------------------------------------------------------------------------
# Shipped as package data
# --------------------------------------------------------------------------------------------------


def test_document_is_package_data():
    shipped = importlib.resources.files("jaxpriv").joinpath("MATH.md")
    assert shipped.is_file()
    assert shipped.read_text(encoding="utf-8") == MATH.read_text(encoding="utf-8")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "MATH.md" in config["tool"]["setuptools"]["package-data"]["jaxpriv"]


def test_reading_it_imports_no_jax():
    code = ("import sys, jaxpriv; text = jaxpriv.math_reference('7.3'); "
            "assert text.startswith('### 7.3 '), text[:40]; assert 'jax' not in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# --------------------------------------------------------------------------------------------------
# math_reference / math_sections
# --------------------------------------------------------------------------------------------------


def test_whole_document():
    assert jaxpriv.math_reference() == MATH.read_text(encoding="utf-8")
    assert jaxpriv.math_reference(None).startswith("# jaxpriv — mathematical reference")


def test_one_subsection():
    text = jaxpriv.math_reference("1.1")
    assert text.startswith("### 1.1 Gaussian mechanism\n")
    assert "ρ(α) = α/(2σ²)" in text
    assert "### 1.2" not in text and "Laplace" not in text
    assert text.endswith("\n") and not text.endswith("\n\n")


def test_a_section_includes_its_subsections_and_stops_at_the_next():
    text = jaxpriv.math_reference("3")
    assert text.startswith("## 3. The shuffle model\n")
    for sub in ("### 3.1 ", "### 3.2 ", "### 3.3 "):
        assert sub in text
    assert "## 4." not in text
    # the last subsection of a section stops at the next section
    last = jaxpriv.math_reference("3.3")
    assert "## 4." not in last and last.rstrip() == text.rstrip()[-len(last.rstrip()):]


def test_spellings_of_a_section_agree():
    expected = jaxpriv.math_reference("3.1")
    for spelling in ("§3.1", "MATH §3.1", " 3.1 ", 3.1, "3.1."):
        assert jaxpriv.math_reference(spelling) == expected
    assert jaxpriv.math_reference(7) == jaxpriv.math_reference("7")


def test_every_listed_section_is_returned():
    sections = jaxpriv.math_sections()
    assert list(sections) == _sections_in_document()
    assert sections["0.1"] == "Conservative"
    assert sections["8"] == "The five seed papers"
    for number, title in sections.items():
        text = jaxpriv.math_reference(number)
        first = text.splitlines()[0]
        assert first.split(" ", 1)[1].startswith(number) and first.endswith(title)


@pytest.mark.parametrize("bad", ["3.9", "13", "1.10", "", "§", "abc", "3.1.1", 3.0, True, object(), ["3.1"]])
def test_bad_section_raises_naming_the_parameter_and_the_valid_ones(bad):
    with pytest.raises(ValueError) as err:
        jaxpriv.math_reference(bad)
    message = str(err.value)
    assert message.startswith("section must be one of the reference's section numbers")
    assert "or None for the whole document" in message
    assert "0, 0.1, 0.2" in message and "3.1" in message and message.rstrip().endswith(f"got {bad!r}")


def test_exported_lazily():
    assert "math_reference" in jaxpriv.__all__ and "math_sections" in jaxpriv.__all__
    assert jaxpriv.math_reference is _reference.math_reference


# --------------------------------------------------------------------------------------------------
# Command line: jaxpriv math [SECTION] [--list]
# --------------------------------------------------------------------------------------------------


def _cli(*argv):
    return subprocess.run([sys.executable, "-m", "jaxpriv", "math", *argv], capture_output=True, text=True,
                          encoding="utf-8", timeout=120)


def test_cli_prints_a_section_and_the_whole_document():
    out = _cli("3.1")
    assert out.returncode == 0, out.stderr
    assert out.stdout == jaxpriv.math_reference("3.1")
    out = _cli()
    assert out.returncode == 0 and out.stdout == jaxpriv.math_reference()


def test_cli_lists_the_sections():
    out = _cli("--list")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == len(jaxpriv.math_sections())
    assert lines[0] == "§0  What the numbers mean: conservative, exact, approximate"
    assert "  §3.1  The clone reduction and its exact numeric bound" in lines


def test_cli_rejects_an_unknown_section_without_importing_jax():
    code = ("import sys; from jaxpriv.cli import main; status = main(['math', '3.9']); "
            "print(status, 'jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["2", "False"], out.stderr
    assert out.stderr.startswith("jaxpriv: error: section must be one of the reference's section numbers (0, 0.1")
    assert out.stderr.rstrip().endswith("got '3.9'")
