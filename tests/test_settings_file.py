"""The system config file: its syntax, precedence (environment > file > default) and the
secrets it names by path."""

from __future__ import annotations

import pytest

from webapp import settings as settings_module
from webapp.settings import (
    SETTINGS_DOC,
    Settings,
    SettingsError,
    layered,
    parse_config,
    with_password,
)


def test_parse_config_reads_name_value_lines():
    text = """
# a comment
JOBREPORT_CLUSTER=alpha
export JOBREPORT_STAFF=ann,ben
JOBREPORT_MAIL_TO="{user}@example.org"
JOBREPORT_MAIL_FROM='reports@example.org'
JOBREPORT_THRESHOLDS = cpu_efficiency_low=0.5
"""
    assert parse_config(text) == {
        "JOBREPORT_CLUSTER": "alpha",
        "JOBREPORT_STAFF": "ann,ben",
        "JOBREPORT_MAIL_TO": "{user}@example.org",
        "JOBREPORT_MAIL_FROM": "reports@example.org",
        "JOBREPORT_THRESHOLDS": "cpu_efficiency_low=0.5",
    }


@pytest.mark.parametrize("line", ["JOBREPORT_CLUSTER", "CLUSTER=x", "jobreport_cluster=x"])
def test_parse_config_names_the_bad_line(line):
    with pytest.raises(SettingsError, match=r"site.conf:2: expected JOBREPORT_NAME=value"):
        parse_config(f"# ok\n{line}\n", "site.conf")


def test_environment_overrides_file_overrides_default(tmp_path):
    conf = tmp_path / "jobreport.conf"
    conf.write_text("JOBREPORT_CLUSTER=from-file\nJOBREPORT_SMTP_PORT=2525\n")
    s = Settings.from_env({"JOBREPORT_CONFIG": str(conf), "JOBREPORT_CLUSTER": "from-env"})
    assert s.cluster == "from-env"  # environment over the file
    assert s.smtp_port == 2525  # the file over the default
    assert s.smtp_host == SETTINGS_DOC["JOBREPORT_SMTP_HOST"][0]  # the default
    # An empty environment value still overrides: it is a value, not an absence.
    assert Settings.from_env({"JOBREPORT_CONFIG": str(conf), "JOBREPORT_CLUSTER": ""}).cluster == ""


def test_default_file_is_read_for_the_process_environment_only(tmp_path, monkeypatch):
    conf = tmp_path / "jobreport.conf"
    conf.write_text("JOBREPORT_CLUSTER=from-default-file\n")
    monkeypatch.setattr(settings_module, "DEFAULT_CONFIG", str(conf))
    monkeypatch.delenv("JOBREPORT_CONFIG", raising=False)
    monkeypatch.delenv("JOBREPORT_CLUSTER", raising=False)
    assert Settings.from_env().cluster == "from-default-file"
    assert Settings.from_env({}).cluster == "demo"  # a given mapping names its own file
    monkeypatch.setenv("JOBREPORT_CONFIG", "")  # empty: no file at all
    assert Settings.from_env().cluster == "demo"


def test_missing_files(tmp_path):
    # The default file may be absent (a machine without one); a named one must exist.
    assert layered({}, str(tmp_path / "absent.conf")) == {}
    with pytest.raises(SettingsError, match="JOBREPORT_CONFIG=.*no such file"):
        Settings.from_env({"JOBREPORT_CONFIG": str(tmp_path / "absent.conf")})


def test_unknown_name_in_the_file_fails_with_its_name(tmp_path):
    conf = tmp_path / "jobreport.conf"
    conf.write_text("JOBREPORT_CLUSTR=x\n")
    with pytest.raises(SettingsError, match="JOBREPORT_CLUSTR"):
        Settings.from_env({"JOBREPORT_CONFIG": str(conf)})


def test_db_password_comes_from_its_file(tmp_path):
    secret = tmp_path / "db-password"
    secret.write_text("p@ss/word\n")
    conf = tmp_path / "jobreport.conf"
    conf.write_text("JOBREPORT_DB_URL=mysql://jobreport@db.example:3306/jobreport\n"
                    f"JOBREPORT_DB_PASSWORD_FILE={secret}\n")
    s = Settings.from_env({"JOBREPORT_CONFIG": str(conf)})
    assert s.db_url == "mysql://jobreport:p%40ss%2Fword@db.example:3306/jobreport"
    # A URL that carries its own password (the environment's) keeps it.
    own = Settings.from_env({"JOBREPORT_CONFIG": str(conf),
                             "JOBREPORT_DB_URL": "mysql://jobreport:env@db.example/jobreport"})
    assert own.db_url == "mysql://jobreport:env@db.example/jobreport"


def test_a_secret_the_caller_may_not_read_is_left_out(tmp_path, monkeypatch):
    secret = tmp_path / "db-password"
    secret.write_text("hidden\n")
    key = tmp_path / "secret-key"
    key.write_text("k" * 40 + "\n")
    real_open = open

    def user_open(path, *args, **kwargs):  # what an ordinary user meets: mode 0600 root
        if str(path) in (str(secret), str(key)):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(settings_module, "open", user_open, raising=False)
    s = Settings.from_env({"JOBREPORT_DB_URL": "mysql://jobreport@127.0.0.1/jobreport",
                           "JOBREPORT_DB_PASSWORD_FILE": str(secret),
                           "JOBREPORT_SECRET_KEY_FILE": str(key)})
    assert s.db_url == "mysql://jobreport@127.0.0.1/jobreport"  # no password in it
    assert s.secret_key == ""  # the web app refuses to start without one: right for a user


def test_secret_files_fill_empty_settings(tmp_path):
    key, smtp = tmp_path / "secret-key", tmp_path / "smtp"
    key.write_text("k" * 40 + "\n")
    smtp.write_text("mailpass\n")
    s = Settings.from_env({"JOBREPORT_SECRET_KEY_FILE": str(key),
                           "JOBREPORT_SMTP_PASSWORD_FILE": str(smtp)})
    assert s.secret_key == "k" * 40 and s.smtp_password == "mailpass"
    with pytest.raises(SettingsError, match="JOBREPORT_SMTP_PASSWORD_FILE"):
        Settings.from_env({"JOBREPORT_SMTP_PASSWORD_FILE": str(tmp_path / "absent")})


def test_with_password_quotes_it():
    assert with_password("mysql://u@h:3306/db?x=1", "a b") == "mysql://u:a%20b@h:3306/db?x=1"


def test_the_deploy_config_names_only_settings_and_no_secret():
    from pathlib import Path
    from urllib.parse import urlsplit

    path = Path(__file__).resolve().parent.parent / "deploy" / "jobreport.conf"
    values = parse_config(path.read_text(), str(path))
    assert set(values) <= set(SETTINGS_DOC)
    assert urlsplit(values["JOBREPORT_DB_URL"]).password is None
    assert not {"JOBREPORT_SECRET_KEY", "JOBREPORT_SMTP_PASSWORD"} & set(values)
    assert values["JOBREPORT_DB_PASSWORD_FILE"] and values["JOBREPORT_SECRET_KEY_FILE"]
