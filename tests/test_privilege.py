"""Who is privileged on a login node: root and the service's own user, decided by who
runs the process (``Caller``), never by which files or passwords it can read; and a URL
with a password in a config file every user may read stops the start."""

from __future__ import annotations

import os

import pytest

from webapp.settings import (
    PRIVILEGED,
    Caller,
    Settings,
    SettingsError,
    caller_env,
    is_privileged,
)

ROOT, SERVICE, BOB = Caller(0, "root"), Caller(998, "jobreport"), Caller(1000, "bob")
LEAKED = "mysql://jobreport:s3cret@127.0.0.1:3306/jobreport"


@pytest.mark.parametrize(("caller", "service_user", "expected"), [
    (ROOT, "jobreport", True),
    (SERVICE, "jobreport", True),
    (BOB, "jobreport", False),
    (Caller(998, "reports"), "reports", True),  # a site's own service user
    (SERVICE, "reports", False),  # ... and then no longer the default's name
    (ROOT, "", True),
    (Caller(1000, ""), "", False),  # a uid the passwd database lacks, no service user
    (Caller(4242, ""), "jobreport", False),
])
def test_privilege_is_who_the_caller_is(caller, service_user, expected):
    assert is_privileged(caller, service_user) is expected


def test_a_password_bob_can_read_does_not_make_him_privileged(tmp_path):
    secret = tmp_path / "db-password"
    secret.write_text("s3cret\n")  # readable by bob: a mistake, still no privilege
    for env in ({"JOBREPORT_DB_URL": LEAKED},
                {"JOBREPORT_DB_URL": "mysql://jobreport@db/jobreport",
                 "JOBREPORT_DB_PASSWORD_FILE": str(secret)}):
        assert not Settings.from_env(env, caller=BOB).privileged
        assert Settings.from_env(env, caller=SERVICE).privileged
        assert Settings.from_env(env, caller=ROOT).privileged


def test_the_service_user_is_the_system_config_files_alone(tmp_path):
    system = tmp_path / "jobreport.conf"
    system.write_text("JOBREPORT_CLUSTER=site\n")
    assert "JOBREPORT_SERVICE_USER" in PRIVILEGED
    got = caller_env({"JOBREPORT_SERVICE_USER": "bob"}, str(system), uid=1000)
    assert "JOBREPORT_SERVICE_USER" not in got  # the default, jobreport
    assert caller_env({"JOBREPORT_SERVICE_USER": "bob"}, str(system),
                      uid=0)["JOBREPORT_SERVICE_USER"] == "bob"  # root may test a value


def _conf(tmp_path, text: str, mode: int, name: str = "jobreport.conf") -> str:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(mode)
    return str(path)


@pytest.mark.parametrize("mode", [0o644, 0o604])
def test_a_password_in_a_world_readable_config_file_is_refused(tmp_path, mode):
    conf = _conf(tmp_path, f"JOBREPORT_CLUSTER=site\nJOBREPORT_DB_URL={LEAKED}\n", mode)
    with pytest.raises(SettingsError) as err:
        Settings.from_env({"JOBREPORT_CONFIG": conf})
    message = str(err.value)
    assert conf in message and "JOBREPORT_DB_URL" in message
    assert "JOBREPORT_DB_PASSWORD_FILE" in message and "s3cret" not in message
    # The system config file on a login node, as a user who is not root reads it.
    with pytest.raises(SettingsError, match="JOBREPORT_DB_PASSWORD_FILE"):
        caller_env({}, conf, uid=1000)


@pytest.mark.parametrize("mode", [0o600, 0o640])
def test_a_password_in_a_config_file_others_cannot_read_is_taken(tmp_path, mode):
    conf = _conf(tmp_path, f"JOBREPORT_DB_URL={LEAKED}\n", mode)
    assert Settings.from_env({"JOBREPORT_CONFIG": conf}).db_url == LEAKED


def test_urls_without_a_password_and_the_environment_are_taken(tmp_path):
    conf = _conf(tmp_path, "JOBREPORT_DB_URL=mysql://jobreport@db/jobreport\n", 0o644)
    assert Settings.from_env({"JOBREPORT_CONFIG": conf}).db_url == "mysql://jobreport@db/jobreport"
    # The services' EnvironmentFile and the tests' var/jobreport.env arrive as environment.
    env = {"JOBREPORT_CONFIG": conf, "JOBREPORT_DB_URL": LEAKED}
    assert Settings.from_env(env).db_url == LEAKED


@pytest.mark.parametrize("key", ["JOBREPORT_ADMIN_COMMENT_DB_URL", "JOBREPORT_ARCHIVE_URL"])
def test_every_url_that_may_hold_a_password_is_checked(tmp_path, key):
    conf = _conf(tmp_path, f"{key}=mysql://user:pw@db/x\n", 0o644)
    with pytest.raises(SettingsError, match=rf"{conf}: {key} holds a password.*mode 0o?644.*"
                                            "EnvironmentFile"):
        Settings.from_env({"JOBREPORT_CONFIG": conf})


def test_a_clusters_world_readable_file_with_a_password_is_refused(tmp_path):
    folder = tmp_path / "clusters"
    folder.mkdir()
    conf = _conf(folder, f"JOBREPORT_DB_URL={LEAKED}\n", 0o644, "v24.conf")
    with pytest.raises(SettingsError, match=rf"{conf}: JOBREPORT_DB_URL holds a password"):
        Settings.from_env({"JOBREPORT_CONFIG": "", "JOBREPORT_CLUSTERS": "v24",
                           "JOBREPORT_CLUSTER_SETTINGS_DIR": str(folder)})
    os.chmod(conf, 0o600)
    s = Settings.from_env({"JOBREPORT_CONFIG": "", "JOBREPORT_CLUSTERS": "v24",
                           "JOBREPORT_CLUSTER_SETTINGS_DIR": str(folder)})
    assert s.for_cluster("v24").db_url == LEAKED
