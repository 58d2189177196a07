"""The carbon intensity a report uses when the site gives none: its country's yearly
average from a public dataset shipped with jobreport (webapp/carbon_intensity.csv:
Ember and Energy Institute data via Our World in Data, CC BY 4.0; its header names the
source and the rows their year). JOBREPORT_CARBON_COUNTRY picks the row;
JOBREPORT_CARBON_INTENSITY, when set, replaces it with the site's own constant or series
(webapp/report/energy.py).
"""

from __future__ import annotations

import csv
import functools
import pathlib
from dataclasses import dataclass

DATA = pathlib.Path(__file__).with_name("carbon_intensity.csv")
DATASET = "Ember and Energy Institute via Our World in Data"
WORLD = "World"


@dataclass(frozen=True)
class CountryIntensity:
    country: str  # the dataset's entity, e.g. "Germany"
    code: str  # ISO 3166-1 alpha-3 (OWID_WRL: the world)
    year: int
    grams_per_kwh: float

    @property
    def source(self) -> str:
        """In words, for the report."""
        return f"country default, {self.country} {self.year} yearly average, source {DATASET}"


def parse_intensity_table(text: str) -> dict[str, CountryIntensity]:
    """Code (upper case) -> row, from the shipped file; ``#`` lines are its provenance::

        Entity,Code,Year,g_co2e_per_kwh
        Germany,DEU,2025,329.65
    """
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    table = {}
    for row in csv.DictReader(lines):
        entry = CountryIntensity(row["Entity"], row["Code"].upper(), int(row["Year"]),
                                 float(row["g_co2e_per_kwh"]))
        table[entry.code] = entry
    return table


@functools.cache
def intensity_table() -> dict[str, CountryIntensity]:
    return parse_intensity_table(DATA.read_text(encoding="utf-8"))


def country_intensity(country: str) -> CountryIntensity | None:
    """The row of ``country``: its alpha-3 code or its name, in any case (``deu``,
    ``Germany``, ``world``); ``""`` -> None (no default intensity). Unknown: KeyError."""
    wanted = country.strip().casefold()
    if not wanted:
        return None
    table = intensity_table()
    for entry in table.values():
        if wanted in (entry.code.casefold(), entry.country.casefold()):
            return entry
    raise KeyError(country)
