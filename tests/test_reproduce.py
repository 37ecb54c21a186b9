"""jaxpriv.reproduce: choosing the seed systems, the verdicts of the headline table (computed from the
numbers), and the layout of systems.md / systems.json (the CLI tests run one system end to end)."""

import json
import math
import sys
import types

import pytest

from jaxpriv import reproduce
from jaxpriv.reproduce import SYSTEMS, claim, compare, headline_table, not_computed, parse_systems, reproduce_systems


def test_parse_systems():
    assert parse_systems("all") == list(SYSTEMS)
    assert parse_systems(" none ") == []
    assert parse_systems("udpfl, apes") == ["udpfl", "apes"]


@pytest.mark.parametrize("spec", ["", "apes,,", "apes,dpsgd", "everything"])
def test_parse_systems_rejects_unknown_or_blank_entries(spec):
    with pytest.raises(ValueError, match="systems must be"):
        parse_systems(spec)


def test_reproduce_systems_rejects_unknown_names(tmp_path):
    with pytest.raises(ValueError, match="systems must be"):
        reproduce_systems(str(tmp_path), quick=True, systems=["apes", "nope"])


@pytest.mark.parametrize("paper, ours, status", [
    (0.057, 0.05723, "reproduced"), (0.057, 0.0598, "reproduced"), (0.057, 0.0600, "differs"),
    (40.1, 47.15, "differs"), (math.inf, math.inf, "reproduced"), (1.0, math.inf, "differs"),
])
def test_compare_relative(paper, ours, status):
    row = compare("P", "q", paper, ours, why="because")
    assert row["status"] == status
    assert row["verdict"].startswith("reproduced" if status == "reproduced" else "differs by ")
    assert ("because" in row["verdict"]) == (status == "differs")


def test_compare_points_time_and_stand_in():
    row = compare("P", "acc", 96.78, 54.04, kind="points", why="digits")
    assert row["status"] == "differs" and row["verdict"] == "differs by -42.7 pp (tolerance ±2 pp): digits"
    assert compare("P", "acc", 87.1, 88.9, kind="points", why="x")["status"] == "reproduced"
    coincidence = compare("P", "acc", 87.1, 87.74, kind="points", why="x", stand_in="digits")
    assert coincidence["status"] == reproduce.STAND_IN and "coincidence" in coincidence["verdict"]
    assert compare("P", "acc", 87.1, 80.0, kind="points", why="x", stand_in="digits")["status"] == "differs"
    assert compare("P", "t", 8.0, 1.7, kind="time", why="x")["status"] == "reproduced"
    assert compare("P", "t", 3840.0, 1.7, kind="time", why="other machine")["verdict"].startswith("differs by 2.26e+03×")
    with pytest.raises(ValueError, match="kind"):
        compare("P", "q", 1.0, 1.0, kind="absolute", why="x")


def test_claim_and_not_computed():
    assert claim("P", "ordering", "a > b", True, "0.5 vs 0.4", why="w")["verdict"] == "reproduced"
    failed = claim("P", "ordering", "a > b", False, "0.3 vs 0.4", why="small data")
    assert failed["status"] == "differs" and failed["verdict"] == "not reproduced: small data"
    missing = not_computed("P", "Table 2", "0.8189", why="no Filter baseline")
    assert missing["status"] == "not computed" and missing["ours_text"] == "—"


def test_headline_table_counts_and_escapes():
    rows = [compare("A", "x | y", 1.0, 1.01, why="w"), compare("A", "z", 1.0, 2.0, why="w"),
            not_computed("B", "t", "3", why="w"), compare("B", "acc", 50.0, 50.5, kind="points", why="w", stand_in="d")]
    text = headline_table(rows)
    assert "**1 reproduced, 1 match only on stand-in data, 1 differ, 1 not computed** (of 4)" in text
    assert "| A | x \\| y |" in text
    assert len([line for line in text.splitlines() if line.startswith("| A ") or line.startswith("| B ")]) == 4


def test_headline_table_rejects_a_row_counted_twice():
    """systems.md has one row per claim: the same paper and headline number twice is an error naming both
    (GSPA's 96.78% was once counted twice, and would have weighed twice in the counts)."""
    rows = [compare("A", "acc", 96.78, 54.0, kind="points", why="w"), compare("B", "acc", 96.78, 54.0, kind="points", why="w"),
            compare("A", "eps", 1.0, 1.0, why="w"), compare("A", "acc", 96.78, 54.0, kind="points", why="w")]
    with pytest.raises(ValueError, match=r"rows must hold one row per paper and headline number, got 'A' / 'acc' "
                                         r"\(2 rows\)$"):
        headline_table(rows)
    assert "(of 3)" in headline_table(rows[:3])  # the same number in two papers' rows is two claims


def test_systems_md_opens_with_the_headline_table_and_json_holds_the_numbers(tmp_path, monkeypatch):
    """With a stand-in system module: the headline table comes first (rows in the papers' order), the
    sections have bullet lists and no raw JSON, and systems.json holds every number (inf as a string)."""
    fake = types.ModuleType("fake_system")

    def fake_reproduce(quick, out_dir):
        return {"title": "Fake (seed 9)", "paper": "0.5 and 1.0", "ours": {"value": 0.51, "big": math.inf},
                "headlines": [compare("rPDP-FL (seed 004)", "late paper", 1.0, 1.0, why="w"),
                              compare("APES / S-APES (seed 000)", "first paper", 0.5, 0.51, why="w")],
                "why_different": ["one reason", "another reason"], "figures": [], "table_markdown": "| a |\n|---|"}

    fake.reproduce = fake_reproduce
    monkeypatch.setitem(sys.modules, "fake_system", fake)
    monkeypatch.setitem(reproduce.SYSTEMS, "fake", ("fake_system", "a fake system"))
    done = reproduce_systems(str(tmp_path), quick=True, systems=["fake"])
    text = (tmp_path / "systems.md").read_text()
    first_section = text.index("## Fake (seed 9)")
    assert text.index("| paper | headline number | paper's value | ours | verdict |") < first_section
    assert text.index("first paper") < text.index("late paper") < first_section
    assert "- one reason\n- another reason" in text and "```json" not in text
    assert "**Ours:** 2 of 2 headline numbers reproduced" in text
    raw = json.loads((tmp_path / "systems.json").read_text())
    assert raw["systems"]["fake"]["ours"] == {"value": 0.51, "big": "inf"}
    assert [r["quantity"] for r in raw["headlines"]] == ["first paper", "late paper"] == \
        [r["quantity"] for r in done["headlines"]]


def test_not_judged_rows_are_counted_apart():
    row = reproduce.not_judged("G", "acc", "96.78%", "61.0%", why="80 of 5,000 steps")
    assert row["status"] == reproduce.NOT_JUDGED and row["verdict"] == "not judged in quick mode: 80 of 5,000 steps"
    text = headline_table([row, compare("A", "x", 1.0, 1.0, why="w")])
    assert "**1 reproduced, 0 match only on stand-in data, 0 differ, 0 not computed, 1 not judged in quick mode** (of 2)" \
        in text


@pytest.mark.parametrize("eps_c, k, delta_prime", [(0.05, 7850, 3.8e-5), (0.057, 3140, 1e-8), (1.0, 4, 0.3)])
def test_implied_delta_prime_inverts_advanced_composition(eps_c, k, delta_prime):
    from jaxpriv.reproduce.apes import implied_delta_prime
    # oracle: advanced composition written out with numpy (Dwork, Rothblum, Vadhan 2010)
    eps_uc = eps_c * math.sqrt(2 * k * math.log(1 / delta_prime)) + k * eps_c * math.expm1(eps_c)
    assert implied_delta_prime(eps_c, k, eps_uc) == pytest.approx(delta_prime, rel=1e-9)
    # below the k ε (e^ε − 1) floor no δ' < 1 reaches the figure
    assert math.isnan(implied_delta_prime(eps_c, k, 0.5 * k * eps_c * math.expm1(eps_c)))


@pytest.mark.parametrize("kwargs, name", [(dict(eps_c=0.0), "eps_c"), (dict(eps_c=math.inf), "eps_c"),
                                          (dict(releases=0), "releases"), (dict(releases=2.5), "releases"),
                                          (dict(eps_uc=-1.0), "eps_uc")])
def test_implied_delta_prime_rejects_bad_inputs(kwargs, name):
    from jaxpriv.reproduce.apes import implied_delta_prime
    args = dict(eps_c=0.05, releases=10, eps_uc=1.0) | kwargs
    with pytest.raises(ValueError, match=name):
        implied_delta_prime(**args)
