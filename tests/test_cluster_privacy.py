"""The site's PrivateData (``scontrol show config``, captured on the stack) and what it
lets a user who is not staff see on /cluster: their own holdings and fair share and the
cluster's totals where Slurm hides other users' jobs or usage; everything otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
from flask import render_template

from webapp.model import Series, SourceUnavailable
from webapp.sources.cluster_overview import ClusterOverview
from webapp.sources.slurm_config import SlurmConfigSource, parse_config, parse_private_data
from webapp.web.cluster_view import TOP, cluster_view, hides_others

CAPTURE = Path(__file__).resolve().parent.parent / "fixtures" / "slurm" / \
    "local-scontrol-show-config.txt"


# -- reading PrivateData -------------------------------------------------------------------
def test_the_stacks_config_hides_nothing():
    text = CAPTURE.read_text()
    config = parse_config(text)
    assert config["ClusterName"] == "demo" and config["SLURM_VERSION"] == "22.05.8"
    assert config["PrivateData"] == "none"
    assert parse_private_data(text) == frozenset()


@pytest.mark.parametrize(("line", "flags"), [
    ("PrivateData             = jobs,usage", {"jobs", "usage"}),
    ("PrivateData             = accounts,jobs,nodes,usage,users",
     {"accounts", "jobs", "nodes", "usage", "users"}),
    ("PrivateData             = none", set()),
])
def test_private_data_flags(line, flags):
    # The stack's capture with its one PrivateData line replaced.
    text = CAPTURE.read_text().replace("PrivateData             = none", line)
    assert parse_private_data(text) == flags


def test_an_answer_without_private_data_is_an_error():
    with pytest.raises(ValueError, match="no PrivateData"):
        parse_private_data("Slurmctld(primary) at vm is UP\n")


def test_the_source_asks_scontrol_once_per_ttl_and_keeps_no_failure():
    calls: list[list[str]] = []

    def runner(argv: list[str]) -> str:
        calls.append(argv)
        if len(calls) == 1:
            raise SourceUnavailable("slurm_config", "down", "exit status 1")
        return CAPTURE.read_text()

    source = SlurmConfigSource("/usr/bin/scontrol", runner=runner, ttl=300)
    with pytest.raises(SourceUnavailable):
        source.private_data()
    assert source.private_data() == frozenset()
    assert source.private_data() == frozenset()
    assert calls == [["/usr/bin/scontrol", "show", "config"]] * 2


def test_a_missing_scontrol_is_unavailable_not_a_crash():
    source = SlurmConfigSource("/nonexistent/scontrol")
    with pytest.raises(SourceUnavailable, match="slurm_config"):
        source.private_data()


# -- what each user sees -------------------------------------------------------------------
USERS = tuple((f"user{i:02}", 4.0, float(i % 3)) for i in range(TOP + 2)) + (
    ("alice", 1.0, 0.0),)
OVERVIEW = ClusterOverview(
    users=USERS,
    accounts=(("physics", 40.0, 8.0), ("chem", 13.0, 5.0)),
    fairshare=(("chem", "", 0.4), ("chem", "alice", 0.7), ("chem", "user01", 0.2),
               ("physics", "user02", 0.9)),
    usage=(Series("physics", ((0.0, 1.0),)),),
)


@pytest.mark.parametrize("flags", [{"jobs"}, {"usage"}, {"accounts"}, {"users"},
                                   {"jobs", "usage"}])
def test_private_data_leaves_a_user_their_own_rows_and_the_totals(flags):
    view = cluster_view(OVERVIEW, "alice", staff=False, private_data=frozenset(flags))
    assert view.overview.users == (("alice", 1.0, 0.0),)  # 13th holder: past the top 10
    assert view.overview.accounts == () and view.overview.usage == ()
    assert view.overview.fairshare == (("chem", "alice", 0.7),)
    assert (view.cpus_held, view.gpus_held) == (sum(u[1] for u in USERS),
                                                sum(u[2] for u in USERS))
    assert view.hidden_by == "PrivateData=" + ",".join(sorted(flags))


def test_staff_see_everybody_whatever_private_data_says():
    view = cluster_view(OVERVIEW, "staffer", staff=True, private_data=frozenset({"jobs"}))
    assert view.overview.users == USERS[:TOP] and view.hidden_by == ""
    assert view.overview.fairshare == OVERVIEW.fairshare and view.overview.usage


@pytest.mark.parametrize("flags", [set(), {"nodes", "partitions", "events"}])
def test_where_slurm_shows_everything_so_does_the_page(flags):
    view = cluster_view(OVERVIEW, "alice", staff=False, private_data=frozenset(flags))
    assert not hides_others(frozenset(flags))
    assert view.overview.users == USERS[:TOP] and view.overview.accounts == OVERVIEW.accounts
    assert view.overview.fairshare == OVERVIEW.fairshare and view.hidden_by == ""


def test_unknown_private_data_hides_as_the_strict_setting_would():
    view = cluster_view(OVERVIEW, "alice", staff=False, private_data=None)
    assert view.overview.users == (("alice", 1.0, 0.0),)
    assert view.hidden_by == "PrivateData could not be read"


def test_the_page_shows_no_other_user_or_account_when_private(app):
    view = cluster_view(OVERVIEW, "alice", staff=False,
                        private_data=frozenset({"jobs", "usage"}))
    with app.test_request_context("/cluster"):
        page = render_template("cluster.html", cluster="demo", overview=view.overview,
                               view=view, unavailable=None, plot=None, targets={})
    assert "private on this cluster (PrivateData=jobs,usage)" in page
    assert "alice" in page and "user01" not in page and "physics" not in page
    assert "<th>account</th><th>CPUs</th>" not in page
    assert "<td>all users</td><td>49</td><td>12</td>" in page

    public = cluster_view(OVERVIEW, "alice", staff=False, private_data=frozenset())
    with app.test_request_context("/cluster"):
        page = render_template("cluster.html", cluster="demo", overview=public.overview,
                               view=public, unavailable=None, plot=None, targets={})
    assert 'id="private"' not in page and "user01" in page and "physics" in page
