"""Every route of the app, walked from its url_map: each parameter it reads, given a bad
value, is a 400 whose page names the parameter, and no value makes any route a 500."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from flask import Flask

from tests.helpers.web import signed_in
from webapp.web import query_params as params
from webapp.web.auth import PROMETHEUS_FRONT

LIST = ("days", "state", "name", "findings", "sort", "order", "cluster")
# The query parameters each endpoint reads. A new route must be listed here (the walk
# below fails on an endpoint it does not know), so its parameters get the same checks.
QUERY: dict[str, tuple[str, ...]] = {
    "views.index": ("job", *LIST),
    "views.job": (), "views.job_pdf": (), "views.job_txt": (), "views.job_plot": (),
    "views.job_json": ("resolution", "pretty"),
    "views.healthz": (),
    "job_lists.user": LIST, "job_lists.account": LIST,
    "history.page": ("user", "name", "days"),
    "staff.report": ("days",),
    "staff.user": (),
    "cluster.cluster": (), "cluster.constants": (),
    "unsubscribe.page": (), "unsubscribe.record": (), "unsubscribe.manage": ("cluster",),
    # The login form's own fields are credentials (a wrong one is a 401, counted by the
    # rate limit), and an unsafe ?next= is dropped for the home page, never followed
    # (the open-redirect defence in test_web): neither is a 400.
    "auth.login": (), "auth.logout": (),
    "api.jobs": ("user", *LIST), "api.account_jobs": LIST,
    "api.job": ("resolution", "pretty"), "api.openapi": (),
    # Prometheus' own parameters, passed on as they came: tests/test_prometheus_front.py
    # (its errors are Prometheus', in JSON: a 400 bad_data, a 503 with Prometheus away).
    **{endpoint: () for endpoint in PROMETHEUS_FRONT},
}
BAD: dict[str, tuple[str, ...]] = {
    "days": ("abc", "0", "1e3", "91", "-1", "7.5", " 7", "\x00"),
    "name": ("\x00", "train\x00", "a\nb", "\x1b[31m", "x" * 201),
    "user": ("\x00", "bob;rm", "a b", "../etc", "x" * 65),
    "job": ("\x00", "abc", "42;drop"),
    "cluster": ("\x00", "elsewhere"),
    "state": ("DONE", "\x00"),
    "findings": ("yes", "\x00"),
    "sort": ("bogus", "cpu_eff'--"),
    "order": ("up", "\x00"),
    "resolution": ("raw", "\x00"),
    "pretty": ("yes", "true", "\x00"),
}
# Path parts: a malformed one is a 400, a well-formed unknown one a 404; each page names
# what it refused.
PATH_BAD = {"job_id": ("\x00", "abc", "1;2"), "name": ("\x00", "a b", "x" * 65),
            "cluster": ("\x00", "elsewhere"), "token": ("\x00", "forged"),
            "plot": ("\x00", "a b", "cpu;rm", "x" * 65),
            "account": ("\x00", "a b", "x" * 65)}
PATH_GOOD = {"job_id": "4242", "name": "alice", "token": "forged", "plot": "cpu",
             "account": "research"}
PATH_WORDS = {"job_id": "job id", "cluster": "cluster", "token": "link", "plot": "plot",
              "account": "account"}


@pytest.fixture
def staff(app):
    return signed_in(app, "staffer")  # staff: every page's checks, not its 403, are reached


def routes(app: Flask):
    """Each rule with good values for its path parts and the method it answers."""
    cluster = app.config["JOBREPORT_SETTINGS"].cluster
    for rule in app.url_map.iter_rules():
        if rule.endpoint in PROMETHEUS_FRONT:
            continue
        good = {arg: PATH_GOOD.get(arg, cluster) for arg in rule.arguments}
        method = "GET" if "GET" in rule.methods else "POST"
        yield rule, good, method


def url(app: Flask, rule, values: dict[str, str]) -> str:
    with app.test_request_context():
        from flask import url_for

        return url_for(rule.endpoint, **values)


def call(client, method: str, path: str, query: dict[str, str] | str | None = None):
    if method == "POST":  # the session's CSRF token, so the route itself answers
        with client.session_transaction() as sess:
            token = sess.get("csrf", "")
        return client.post(path, query_string=query, data={"csrf_token": token})
    return client.get(path, query_string=query)


def test_every_endpoint_is_known(app):
    endpoints = {rule.endpoint for rule in app.url_map.iter_rules()}
    assert endpoints == set(QUERY), "list the new route's query parameters in QUERY"
    assert {p for ps in QUERY.values() for p in ps} <= set(BAD)


def test_views_read_the_query_only_through_query_params():
    """One path: a view that read request.args itself would skip the checks."""
    web = Path(__file__).resolve().parent.parent / "webapp" / "web"
    read: set[str] = set()
    for path in web.glob("*.py"):
        if path.name == "prometheus_front.py":  # Prometheus' parameters: promql_guard's
            continue
        for line in path.read_text().splitlines():
            if re.search(r"request\.args\b", line):
                assert re.search(r"params\.\w+\(request\.args", line), (
                    f"{path.name}: {line.strip()}")
                read |= set(re.findall(r'request\.args, "(\w+)"', line))
    assert read and read <= set(BAD), "give the new parameter bad values in BAD"


def test_every_bad_query_parameter_is_a_400_naming_it(app, staff):
    walked = 0
    for rule, good, method in routes(app):
        for param in QUERY[rule.endpoint]:
            for value in BAD[param]:
                answer = call(staff, method, url(app, rule, good), {param: value})
                body = answer.get_data(as_text=True)
                where = f"{method} {rule.rule} ?{param}={value!r}"
                assert answer.status_code == 400, f"{where}: {answer.status_code}"
                assert param in body, f"{where}: the page does not name {param}"
                walked += 1
    assert walked > 100


def test_every_bad_path_part_is_refused_by_name(app, staff):
    refused = 0
    for rule, good, method in routes(app):
        for arg in rule.arguments:
            for value in PATH_BAD[arg]:
                answer = call(staff, method, url(app, rule, {**good, arg: value}))
                where = f"{method} {rule.rule} {arg}={value!r}"
                assert answer.status_code in (400, 404), f"{where}: {answer.status_code}"
                word = PATH_WORDS.get(arg) or rule.endpoint.split(".")[1]
                assert word in answer.get_data(as_text=True), f"{where}: does not name it"
                refused += 1
    assert refused > 20


def test_no_value_of_any_parameter_is_a_500_anywhere(app, staff):
    """Every parameter any route reads, sent to every route: unknown ones are ignored."""
    names = sorted({p for ps in QUERY.values() for p in ps} | {"next"})
    sent = 0
    for rule, good, method in routes(app):
        for name in names:
            # As sent on the wire: NUL, a byte that is not UTF-8, a stray %, a long value.
            for value in ("%00", "%FF", "%", "%E2%80%AE", "x" * 5000):
                answer = call(staff, method, url(app, rule, good), f"{name}={value}")
                assert answer.status_code < 500, f"{rule.rule} ?{name}={value!r}"
                sent += 1
    assert sent > 1000


def test_json_and_text_urls_say_which_parameter_in_their_own_format(staff):
    answer = staff.get("/jobs/4242.json?pretty=yes")
    assert answer.status_code == 400 and answer.get_json()["message"].startswith("pretty ")
    history = staff.get("/history?days=abc")
    assert "days must be a whole number from 1 to 90" in history.get_data(as_text=True)


@pytest.mark.parametrize(("args", "expected"), [
    ({}, 30), ({"days": ""}, 30), ({"days": "1"}, 1), ({"days": "90"}, 90)])
def test_whole_numbers_in_range_and_their_default(args, expected):
    assert params.whole_number(args, "days", 1, 90, 30) == expected


def test_names_and_text():
    assert params.optional_name({"user": " alice "}, "user") == "alice"
    assert params.optional_name({}, "user") == ""
    assert params.text({"name": " train-b.sh "}, "name") == "train-b.sh"
    assert params.text({"name": "entraînement"}, "name") == "entraînement"
    with pytest.raises(params.BadQuery, match="^name must be printable"):
        params.text({"name": "a\x00b"}, "name")
    with pytest.raises(params.BadQuery, match="^account must be a Slurm account name"):
        params.slurm_name("a/b", "account")
