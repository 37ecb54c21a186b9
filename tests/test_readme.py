"""The README's front door and the pages it leads to run: every ```python block of README.md and of each
page under docs/ (the guide holds the examples moved out of the README), page by page, in order, in one
namespace per page, and every number a block quotes in a comment after an expression (``expr  # 5.632 (RDP)``,
``# (5.181, 5.194): …``, ``# σ = 1.565 …``; for ``print(…)`` the numbers printed) equals the value computed,
to the digits quoted.
Editing a quoted number, or a change of the library that moves one, fails here (issue 34).

The blocks are run once per session (a module fixture); the checks then compare the recorded values.
"""

import ast
import contextlib
import io
import io as _io
import pathlib
import re
import tokenize

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: the least each page must hold (python blocks, quoted values checked): an empty or lost page fails here.
#: The guide holds the README's former eight blocks and their quotes; the README keeps a first answer.
MINIMA = {"README.md": (1, 3), "docs/guide.md": (8, 14)}


def pages() -> list[pathlib.Path]:
    """The README, then every page under docs/ (each is tested, listed in MINIMA or not)."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


NUMBER = r"-?\d[\d_]*(?:\.\d+)?(?:e-?\d+)?"
#: a quote opens the comment: a number, a parenthesised tuple of numbers, or "σ = number"
QUOTE = re.compile(rf"\s*(?:σ = )?(\(\s*{NUMBER}(?:\s*,\s*{NUMBER})*\s*\)|{NUMBER}(?![\w(]))")


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)


def quoted_numbers(comment: str) -> list[str]:
    """The numbers a comment opens with (as written), or [] when it does not quote a value."""
    match = QUOTE.match(comment)
    return re.findall(NUMBER, match.group(1)) if match else []


def matches(value: float, quoted: str) -> bool:
    """``value`` rounds to ``quoted``: within half a unit of its last digit."""
    mantissa = quoted.split("e")[0]
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    exponent = int(quoted.split("e")[1]) if "e" in quoted else 0
    tolerance = 0.5 * 10.0 ** (exponent - decimals)
    return abs(value - float(quoted.replace("_", ""))) <= tolerance * (1 + 1e-9)


def numbers_of(value) -> list[float]:
    if isinstance(value, (tuple, list)):
        return [x for item in value for x in numbers_of(item)]
    if isinstance(value, str):
        return [float(x) for x in re.findall(NUMBER, value)]
    return np.asarray(value, dtype=np.float64).ravel().tolist()


def comments_by_line(source: str) -> dict[int, str]:
    tokens = tokenize.generate_tokens(_io.StringIO(source).readline)
    return {tok.start[0]: tok.string.lstrip("#").strip() for tok in tokens if tok.type == tokenize.COMMENT}


def run_blocks(blocks: list[str], page: str = "README.md") -> list[dict]:
    """Execute the blocks in one namespace, statement by statement; return every quoted value checked:
    {page, block, line, source, quoted, computed}."""
    namespace: dict = {"__name__": "readme"}
    quotes = []
    for b, source in enumerate(blocks):
        comments = comments_by_line(source)
        for stmt in ast.parse(source).body:
            comment = comments.get(stmt.end_lineno, "")
            quoted = quoted_numbers(comment) if isinstance(stmt, ast.Expr) else []
            if not quoted:
                exec(compile(ast.Module([stmt], []), f"{page} block {b + 1}", "exec"), namespace)
                continue
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                value = eval(compile(ast.Expression(stmt.value), f"{page} block {b + 1}", "eval"), namespace)
            if value is None:  # print(...): the numbers printed
                value = printed.getvalue()
            quotes.append({"page": page, "block": b + 1, "line": stmt.end_lineno,
                           "source": ast.get_source_segment(source, stmt), "quoted": quoted,
                           "computed": numbers_of(value)})
    return quotes


@pytest.fixture(scope="module")
def blocks_by_page() -> dict[str, list[str]]:
    return {path.relative_to(ROOT).as_posix(): python_blocks(path.read_text(encoding="utf-8"))
            for path in pages()}


@pytest.fixture(scope="module")
def quotes(blocks_by_page):
    for page, (least, _) in MINIMA.items():
        assert len(blocks_by_page.get(page, [])) >= least, f"{page}: its python blocks were not found"
    return [q for page, blocks in blocks_by_page.items() for q in run_blocks(blocks, page)]


def test_every_block_runs_and_quotes_numbers(quotes):
    # the parser finds the quotes on every page (an empty list would pass every check below)
    for page, (_, least) in MINIMA.items():
        assert sum(q["page"] == page for q in quotes) >= least, [q["source"] for q in quotes if q["page"] == page]


def test_the_readme_links_every_page():
    """A page under docs/ holds what the README no longer says: the README must lead to each."""
    text = README.read_text(encoding="utf-8")
    for path in pages()[1:]:
        assert f"]({path.relative_to(ROOT).as_posix()}" in text, f"README.md does not link {path.name}"


def test_every_quoted_number_is_the_computed_one(quotes):
    wrong = [f"{q['page']} block {q['block']} line {q['line']}: {q['source']!r} quotes {q['quoted']}, computes "
             f"{q['computed'][:len(q['quoted'])]}"
             for q in quotes
             if len(q["computed"]) < len(q["quoted"])
             or not all(matches(c, s) for c, s in zip(q["computed"], q["quoted"]))]
    assert not wrong, "\n".join(wrong)


def test_an_edited_quote_fails(quotes):
    """Each quoted number, its last digit changed by one, no longer matches what the block computes."""
    for q in quotes:
        for computed, quoted in zip(q["computed"], q["quoted"]):
            mantissa, _, exponent = quoted.partition("e")
            last = int(mantissa[-1])
            edited = mantissa[:-1] + str(last + 1 if last < 9 else last - 1) + (f"e{exponent}" if exponent else "")
            assert not matches(computed, edited), (q["source"], quoted, edited)


def test_the_gradient_example_is_float64_without_a_warning(blocks_by_page):
    """The guide's ``jax.grad(calibrate.noise_multiplier)`` block, run alone in a fresh namespace, emits no
    warning and gives a float64 derivative (issue 34: it printed a UserWarning and returned float32; the
    quote check alone would pass a float32 −0.9290)."""
    import warnings

    blocks = [b for b in blocks_by_page["docs/guide.md"] if "jax.grad(calibrate.noise_multiplier)" in b]
    assert len(blocks) == 1, "the guide's gradient example was not found"
    namespace: dict = {"__name__": "readme"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec(compile(blocks[0], "docs/guide.md gradient block", "exec"), namespace)
    dsigma = namespace["dsigma"]
    assert np.asarray(dsigma).dtype == np.float64 and getattr(dsigma, "dtype", np.float64) == np.float64
    assert np.isfinite(dsigma) and float(dsigma) < 0  # σ falls as the budget grows


@pytest.mark.parametrize("comment, quoted", [
    ("5.63199 (dp_accounting: 5.63201)", ["5.63199"]),
    ("(5.181, 5.194): certified [lower, upper] by PLD", ["5.181", "5.194"]),
    ("σ = 1.565 (RDP needs 1.662)", ["1.565"]),
    ("4.125803, and ε(σ) ≤ 1", ["4.125803"]),
    ("1.0 and a certified lower bound below it", ["1.0"]),
    ("(0.004267, 14063)", ["0.004267", "14063"]),
    ("= Gaussian(1.1)'s", []),
    ("exact curve, shape (K,)", []),
    ("calibrated σ, ε spent so far (≤ 3)", []),
])
def test_quoted_numbers_parser(comment, quoted):
    assert quoted_numbers(comment) == quoted
