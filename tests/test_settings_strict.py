"""One boolean and one range rule for every deployable: a boolean setting takes 1/0,
true/false, yes/no or on/off in any case and nothing else; a number outside its range is
refused with the variable's name and the range; a flag that mirrors a setting takes what
the setting takes."""

from __future__ import annotations

import argparse
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st

from jobreport_common.settings import (
    BOOLEAN_WORDS,
    FALSE_WORDS,
    TRUE_WORDS,
    SettingsError,
    boolean,
    declared,
    integer,
    number,
    ranged,
)
from jobs_exporter.settings import PREFIX as EXPORTER_PREFIX
from jobs_exporter.settings import Settings as ExporterSettings
from slurm_exporter.__main__ import build_parser as slurm_parser
from slurm_exporter.__main__ import settings_from as slurm_settings_from
from slurm_exporter.settings import PREFIX as SLURM_PREFIX
from slurm_exporter.settings import Settings as SlurmSettings
from tests.helpers.web import login, make_client, password_settings
from webapp.cli.staff import add_staff_arguments
from webapp.settings import Settings as WebSettings

DEPLOYABLES = ((WebSettings, "JOBREPORT_"), (ExporterSettings, EXPORTER_PREFIX),
               (SlurmSettings, SLURM_PREFIX))
BOOLEANS = [(cls, prefix + f.name.upper(), f.name)
            for cls, prefix in DEPLOYABLES for f in declared(cls)
            if f.metadata["parse"] is boolean]
WORDS = [(w, True) for w in TRUE_WORDS] + [(w, False) for w in FALSE_WORDS]


def in_some_case(word: str) -> st.SearchStrategy[str]:
    """``word`` with each letter upper or lower case, as a person might type it."""
    return st.lists(st.booleans(), min_size=len(word), max_size=len(word)).map(
        lambda upper: "".join(c.upper() if u else c for c, u in zip(word, upper, strict=True)))


word_and_value = st.sampled_from(WORDS).flatmap(
    lambda wv: st.tuples(in_some_case(wv[0]), st.just(wv[1])))


def test_every_bool_setting_of_every_deployable_uses_the_one_boolean():
    for cls, prefix in DEPLOYABLES:
        for f in declared(cls):
            if f.type == "bool":
                assert f.metadata["parse"] is boolean, prefix + f.name.upper()
    assert {var for _, var, _ in BOOLEANS} >= {
        "JOBREPORT_SESSION_COOKIE_SECURE", "JOBREPORT_SMTP_STARTTLS", "JOBREPORT_PDF_PROCESS",
        "JOBREPORT_EXPORTER_FD_CACHE"}


def test_every_numeric_setting_uses_the_shared_parsers():
    # No deployable writes its own range check again: ranged(), or a plain number.
    checked = set()
    for cls, prefix in DEPLOYABLES:
        for f in declared(cls):
            if f.type in ("int", "float"):
                parse = f.metadata["parse"]
                assert parse in (integer, number) or \
                    parse.__qualname__ == "ranged.<locals>.parse", prefix + f.name.upper()
                checked.add(prefix + f.name.upper())
    assert {"JOBREPORT_SMTP_PORT", "JOBREPORT_MIN_COVERAGE"} <= checked, checked


@given(word_and_value)
def test_boolean_takes_the_eight_words_in_any_case(case):
    word, value = case
    assert boolean("X", word) is value


@pytest.mark.parametrize("raw", ["maybe", "", "2", "t", "y", "enabled", "of", "onn", "-1"])
def test_boolean_refuses_anything_else_naming_the_variable_and_the_words(raw):
    with pytest.raises(SettingsError) as exc:
        boolean("JOBREPORT_X", raw)
    assert str(exc.value) == f"JOBREPORT_X={raw!r} is not a boolean: use {BOOLEAN_WORDS}"


@pytest.mark.parametrize(("cls", "var", "field"), BOOLEANS, ids=[v for _, v, _ in BOOLEANS])
def test_each_deployable_refuses_maybe_naming_the_variable(cls, var, field):
    with pytest.raises(SettingsError, match=f"^{var}='maybe' is not a boolean: use 1/0"):
        cls.from_env({var: "maybe"})


@pytest.mark.parametrize(("cls", "var", "field"), BOOLEANS, ids=[v for _, v, _ in BOOLEANS])
@examples(max_examples=25, deadline=None)
@given(case=word_and_value)
def test_each_deployable_takes_the_eight_words_in_any_case(cls, var, field, case):
    word, value = case
    assert getattr(cls.from_env({var: word}), field) is value


def test_session_cookie_secure_on_sends_secure_cookies(tmp_path):
    # Before one boolean, "on" read as False: the Secure flag quietly went away.
    base = password_settings(tmp_path)
    settings = WebSettings.from_env({
        "JOBREPORT_SECRET_KEY": base.secret_key, "JOBREPORT_PASSWORD_FILE": base.password_file,
        "JOBREPORT_WEB_STATE": base.web_state, "JOBREPORT_PDF_CACHE_DIR": base.pdf_cache_dir,
        "JOBREPORT_ARCHIVE_URL": base.archive_url, "JOBREPORT_OUTBOX": base.outbox,
        "JOBREPORT_PDF_PROCESS": "Off", "JOBREPORT_SESSION_COOKIE_SECURE": "on"})
    assert settings.session_cookie_secure is True and settings.pdf_process is False
    resp = login(make_client(replace(settings, staff=base.staff)), "alice")
    assert resp.status_code == 302
    assert "; Secure" in resp.headers["Set-Cookie"]


@pytest.mark.parametrize(("cls", "var", "raw", "refused"), [
    (WebSettings, "JOBREPORT_MIN_COVERAGE", "1.5", "is not a number from 0 to 1"),
    (WebSettings, "JOBREPORT_MIN_COVERAGE", "-0.1", "is not a number from 0 to 1"),
    (WebSettings, "JOBREPORT_SMTP_PORT", "0", "is not an integer from 1 to 65535"),
    (WebSettings, "JOBREPORT_SMTP_PORT", "65536", "is not an integer from 1 to 65535"),
    (WebSettings, "JOBREPORT_PDF_BUILDS", "0", "is not an integer >= 1"),
    (WebSettings, "JOBREPORT_PROMETHEUS_TIMEOUT", "0", "is not a number > 0"),
    (WebSettings, "JOBREPORT_SACCT_TIMEOUT", "-5", "is not a number > 0"),
    (WebSettings, "JOBREPORT_MAIL_DAILY_CAP", "-1", "is not an integer >= 0"),
    (WebSettings, "JOBREPORT_TRUSTED_PROXIES", "1.5", "is not an integer >= 0"),
    (WebSettings, "JOBREPORT_SIZING_CACHE_SECONDS", "nan", "is not a number >= 0"),
    (WebSettings, "JOBREPORT_CARBON_INTENSITY", "-1", "is not a number >= 0"),
    (ExporterSettings, "JOBREPORT_EXPORTER_SCRAPE_BUDGET", "3600",
     "is not a number >= 0 and < 3600"),
    (ExporterSettings, "JOBREPORT_EXPORTER_BMC_INTERVAL", "0.5", "is not a number from 1 to 3600"),
    (SlurmSettings, "JOBREPORT_SLURM_EXPORTER_POLL_LIMIT", "0", "is not a number > 0"),
    (SlurmSettings, "JOBREPORT_SLURM_EXPORTER_TIMEOUT", "-1", "is not a number > 0"),
])
def test_out_of_range_is_refused_naming_the_variable_and_the_range(cls, var, raw, refused):
    with pytest.raises(SettingsError) as exc:
        cls.from_env({var: raw})
    assert str(exc.value) == f"{var}={raw!r} {refused}"


@pytest.mark.parametrize(("cls", "var", "raw", "field", "value"), [
    (WebSettings, "JOBREPORT_MIN_COVERAGE", "0", "min_coverage", 0.0),
    (WebSettings, "JOBREPORT_MIN_COVERAGE", "1", "min_coverage", 1.0),
    (WebSettings, "JOBREPORT_SMTP_PORT", "65535", "smtp_port", 65535),
    (WebSettings, "JOBREPORT_MAIL_DAILY_CAP", "0", "mail_daily_cap", 0),
    (ExporterSettings, "JOBREPORT_EXPORTER_SCRAPE_BUDGET", "0", "scrape_budget", 0.0),
    (ExporterSettings, "JOBREPORT_EXPORTER_BMC_INTERVAL", "3600", "bmc_interval", 3600.0),
    (SlurmSettings, "JOBREPORT_SLURM_EXPORTER_POLL_LIMIT", "0.5", "poll_limit", 0.5),
])
def test_the_bounds_of_a_range_are_taken(cls, var, raw, field, value):
    assert getattr(cls.from_env({var: raw}), field) == value


def test_thresholds_and_staff_report_items_use_the_same_rule():
    with pytest.raises(SettingsError, match=r"^JOBREPORT_THRESHOLDS: gpu_idle='nan' is not a "
                       r"number >= 0$"):
        WebSettings.from_env({"JOBREPORT_THRESHOLDS": "gpu_idle=nan"})
    with pytest.raises(SettingsError, match=r"^JOBREPORT_STAFF_REPORT: days='400' is not a "
                       r"number > 0 and <= 366$"):
        WebSettings.from_env({"JOBREPORT_STAFF_REPORT": "days=400"})
    assert WebSettings.from_env({"JOBREPORT_STAFF_REPORT": "days=366"}).staff_report.days == 366


@pytest.mark.parametrize(("parse", "raw", "message"), [
    (ranged(at_least=1, kind=int), "1.0", "V='1.0' is not an integer >= 1"),
    (ranged(below=10), "inf", "V='inf' is not a number < 10"),
    (ranged(above=0, at_most=2.5), "2.6", "V='2.6' is not a number > 0 and <= 2.5"),
])
def test_ranged_names_the_kind_and_the_range(parse, raw, message):
    with pytest.raises(SettingsError) as exc:
        parse("V", raw)
    assert str(exc.value) == message


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_ranged_returns_exactly_the_values_inside(x):
    parse = ranged(at_least=0, below=1)
    if 0 <= x < 1:
        assert parse("V", repr(x)) == x
    else:
        with pytest.raises(SettingsError):
            parse("V", repr(x))


@pytest.mark.parametrize("bounds", [{}, {"at_least": 0, "above": 0}, {"at_most": 1, "below": 1}])
def test_ranged_wants_one_bound_a_side(bounds):
    with pytest.raises(ValueError, match="ranged"):
        ranged(**bounds)


def test_slurm_exporter_flags_take_what_their_variables_take():
    base = SlurmSettings.from_env({})
    for flag, var in (("--poll-limit", "POLL_LIMIT"), ("--timeout", "TIMEOUT")):
        args = slurm_parser().parse_args([flag, "0"])
        with pytest.raises(SettingsError, match=f"^{flag}='0' is not a number > 0$"):
            slurm_settings_from(args, base)
        with pytest.raises(SettingsError, match=f"^{SLURM_PREFIX}{var}='0' is not a number > 0$"):
            SlurmSettings.from_env({SLURM_PREFIX + var: "0"})


def test_staff_report_days_flag_takes_what_the_setting_takes(capsys):
    parser = argparse.ArgumentParser()
    add_staff_arguments(parser)
    assert parser.parse_args(["--days", "366"]).days == 366.0
    with pytest.raises(SystemExit):
        parser.parse_args(["--days", "0"])
    assert "--days='0' is not a number > 0 and <= 366" in capsys.readouterr().err
