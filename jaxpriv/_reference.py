"""The mathematical reference that ships with jaxpriv (``jaxpriv/MATH.md``), readable from an install.

Docstrings and the command line cite it as "MATH §3.1"; :func:`math_reference` returns the whole text or
one numbered section. Standard library only: reading it costs no JAX import.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

__all__ = ["math_reference", "math_sections"]

#: "## 3. The shuffle model" (a section) or "### 3.1 The clone reduction …" (a subsection)
_HEADING = re.compile(r"^(#{2,3}) (\d+(?:\.\d+)?)\.? +(\S.*)$")


@functools.lru_cache(maxsize=1)
def _text() -> str:
    return resources.files("jaxpriv").joinpath("MATH.md").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def _headings() -> tuple:
    """(number, title, level, line index) of every numbered heading, in document order."""
    found = []
    for index, line in enumerate(_text().splitlines()):
        match = _HEADING.match(line)
        if match:
            found.append((match.group(2), match.group(3).strip(), len(match.group(1)), index))
    return tuple(found)


def math_sections() -> dict[str, str]:
    """The numbered sections of the reference: {"0": "What the numbers mean: …", "0.1": "Conservative", …}.

    Example:
      >>> from jaxpriv import math_sections
      >>> math_sections()["3.1"]
      'The clone reduction and its exact numeric bound'
    """
    return {number: title for number, title, _, _ in _headings()}


def _normalise(section) -> str | None:
    """"3.1", "§3.1", "MATH §3.1", 3 and 3.1 all name section 3.1 (or 3); anything else is None."""
    if isinstance(section, bool):
        return None
    if isinstance(section, (int, float)):
        section = repr(section)
    if not isinstance(section, str):
        return None
    text = section.strip()
    for prefix in ("MATH", "§"):
        if text.upper().startswith(prefix):
            text = text[len(prefix):].strip()
    return text.rstrip(".") or None


def math_reference(section: str | int | float | None = None) -> str:
    """The mathematical reference shipped with jaxpriv (``jaxpriv/MATH.md``): the whole text, or one section.

    Every formula behind the library's numbers with its source (authors, venue, year, arXiv id), the errata
    found in the papers, and what "conservative" and "exact" mean (§0); §8 defines the five seed papers and
    §9 lists the references. Docstrings cite it as "MATH §3.1". The command line prints the same text:
    ``jaxpriv math 3.1``.

    Args:
      section: ``None`` for the whole document, or a section number such as ``"3"`` (with its
        subsections), ``"3.1"``, ``"§3.1"`` or ``"MATH §3.1"`` (an int or float such as 3 or 3.1 works too).
        :func:`math_sections` lists the numbers.

    Returns:
      The Markdown text: from the section's heading up to the next heading of the same or a higher level.

    Raises:
      ValueError: ``section`` names no section; the message lists the valid ones.

    Example:
      >>> from jaxpriv import math_reference
      >>> print(math_reference("1.1"), end="")
      ### 1.1 Gaussian mechanism
      <BLANKLINE>
      Noise multiplier σ: ρ(α) = α/(2σ²) [Mir17].
      >>> "### 3.2 APES" in math_reference("3")      # a section includes its subsections
      True
      >>> math_reference("3.9")  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ...
      ValueError: section must be one of the reference's section numbers (0, 0.1, ...) or None for the whole ...
    """
    text = _text()
    if section is None:
        return text
    number = _normalise(section)
    headings = _headings()
    for position, (candidate, _, level, start) in enumerate(headings):
        if candidate == number:
            lines = text.splitlines()
            stop = len(lines)
            for _, _, other_level, other_start in headings[position + 1:]:
                if other_level <= level:
                    stop = other_start
                    break
            return "\n".join(lines[start:stop]).strip() + "\n"
    valid = [h[0] for h in headings]
    raise ValueError(f"section must be one of the reference's section numbers ({', '.join(valid)}) "
                     f"or None for the whole document, got {section!r}")
