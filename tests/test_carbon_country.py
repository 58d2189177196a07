"""The default carbon intensity: a country's yearly average from the shipped public dataset
(webapp/carbon_intensity.csv), named with its year and source in every report, which a
site's own constant or series (JOBREPORT_CARBON_INTENSITY) replaces."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.helpers.reports import sample_report
from webapp import carbon
from webapp.renderers import json as json_renderer
from webapp.renderers import text as text_renderer
from webapp.report.energy import compute_energy, intensity_for
from webapp.settings import Settings, SettingsError

KWH = 3.6e6
WORLD_SOURCE = ("country default, World 2025 yearly average, "
                "source Ember and Energy Institute via Our World in Data")


def test_the_shipped_table_names_its_source_and_each_year():
    header = [line for line in carbon.DATA.read_text().splitlines() if line.startswith("#")]
    assert "Our World in Data" in " ".join(header) and "CC BY 4.0" in " ".join(header)
    table = carbon.intensity_table()
    assert len(table) == 215
    assert table["OWID_WRL"] == carbon.CountryIntensity("World", "OWID_WRL", 2025, 458.29)
    assert table["DEU"] == carbon.CountryIntensity("Germany", "DEU", 2025, 329.65)
    assert table["FRA"].grams_per_kwh == 41.44 and table["IND"].grams_per_kwh == 670.13
    assert all(2000 <= e.year <= 2025 and 0 <= e.grams_per_kwh < 1400 for e in table.values())


def test_parse_intensity_table_on_literal_lines():
    text = "# a source line\nEntity,Code,Year,g_co2e_per_kwh\nGermany,deu,2025,329.65\n"
    assert carbon.parse_intensity_table(text) == {
        "DEU": carbon.CountryIntensity("Germany", "DEU", 2025, 329.65)}


@pytest.mark.parametrize("country, code", [("DEU", "DEU"), ("deu", "DEU"), ("Germany", "DEU"),
                                           ("world", "OWID_WRL"), (" Norway ", "NOR")])
def test_country_by_code_or_name(country, code):
    assert carbon.country_intensity(country).code == code


def test_no_country_no_default_and_an_unknown_one_is_an_error():
    assert carbon.country_intensity("") is None
    with pytest.raises(KeyError):
        carbon.country_intensity("Atlantis")


def energy_report():
    report = sample_report()
    usage = dataclasses.replace(report.usage, energy_joules=2 * KWH)
    return dataclasses.replace(report, usage=usage)


def test_without_a_site_intensity_the_country_default_gives_co2e():
    report = energy_report()
    intensity = intensity_for("", report, None, "World")
    energy = compute_energy(report, intensity)
    assert energy.intensity_g_per_kwh == 458.29
    assert energy.co2e_grams == pytest.approx(2 * 458.29)
    assert energy.intensity_source == WORLD_SOURCE
    germany = intensity_for("", report, None, "DEU")
    assert germany.source == ("country default, Germany 2025 yearly average, "
                              "source Ember and Energy Institute via Our World in Data")
    # Neither set: no CO2e, as before.
    assert intensity_for("", report, None, "") is None


def test_a_site_constant_or_series_overrides_the_country():
    report = energy_report()
    assert intensity_for("370", report, None, "World").grams_per_kwh == 370.0
    series = intensity_for("promql:grid", report, lambda q, t: [({}, 250.0)], "World")
    assert series.grams_per_kwh == 250.0 and "grid" in series.source


def test_settings_default_to_the_world_and_refuse_an_unknown_country():
    env = {"JOBREPORT_CONFIG": ""}
    assert Settings.from_env(env).carbon_country == "World"
    assert Settings.from_env(env | {"JOBREPORT_CARBON_COUNTRY": "fra"}).carbon_country == "fra"
    assert Settings.from_env(env | {"JOBREPORT_CARBON_COUNTRY": ""}).carbon_country == ""
    with pytest.raises(SettingsError, match="JOBREPORT_CARBON_COUNTRY"):
        Settings.from_env(env | {"JOBREPORT_CARBON_COUNTRY": "Atlantis"})


def test_reports_name_the_default_its_year_and_source():
    report = energy_report()
    report = dataclasses.replace(
        report, energy=compute_energy(report, intensity_for("", report, None, "World")))
    text = text_renderer.render(report)
    assert all(len(line) <= 80 for line in text.splitlines())
    joined = " ".join(text.split())
    assert f"Energy: 2.0 kWh; 917 g CO2e at 458 g/kWh ({WORLD_SOURCE})" in joined
    data = json.loads(json_renderer.render(report))["energy"]
    assert data["co2e_grams"] == pytest.approx(916.58)
    assert data["carbon_intensity_g_per_kwh"] == 458.29
    assert data["carbon_intensity_source"] == WORLD_SOURCE
