"""jaxpriv.reproduce: choosing the seed systems (the CLI tests run one end to end)."""

import pytest

from jaxpriv.reproduce import SYSTEMS, parse_systems, reproduce_systems


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
