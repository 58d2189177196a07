"""The Prometheus front's check (webapp/web/promql_guard.py), on its own: which PromQL a
user may send, decided from promql-parser's syntax tree and the jobs' owners."""

from __future__ import annotations

import pytest

from webapp.model import JobNotFound
from webapp.sources.prometheus import job_selector
from webapp.web import promql_guard as guard
from webapp.web.promql_guard import BadExpression, Refused, Rules

RULES = Rules(public=frozenset({"slurm_*", "up", "jobs_scrape_*", "jobs_exporter_*"}))
OWNERS = {"4242": "alice", "4243": "alice", "5000": "bob", "6002+0": "alice",
          "6002+1": "alice", "6000_1": "alice"}


def owner_of(job_id: str) -> str | None:
    try:
        return OWNERS[job_id]
    except KeyError:
        raise JobNotFound(job_id) from None


def verdict(query: str, user: str = "alice", rules: Rules = RULES) -> str | None:
    """None when ``user`` may send ``query``; else the reason it is refused."""
    try:
        guard.check_owners(guard.jobs_in_query(query, rules),
                           lambda job_id: owner_of(job_id) == user)
    except Refused as exc:
        return str(exc)
    return None


HET = "{" + job_selector(("6002+0", "6002+1")) + "}"  # the report's own het-job form

ALLOWED = [
    'max_over_time(jobs_cpu_seconds_total{jobid="4242"}[1h])',
    'sum by (instance) (rate(jobs_cpu_seconds_total{jobid="4242"}[5m]))',
    'jobs_cpus{jobid=~"4242|4243"}',
    'jobs_cpus{jobid=~"(4242|4243)"}',  # Grafana's multi-value variable
    'jobs_cpus{jobid="6000_1"}',  # an array task
    f"jobs_memory_rss_bytes{HET}",
    'jobs_cpus{jobid="6002+1"}',
    'jobs_cpus{jobid="4242", jobid!="5000"}',  # a negative matcher narrows, never widens
    'jobs_cpus{jobid="4242" or jobid="4243"}',
    'max_over_time(rate(jobs_cpu_seconds_total{jobid="4242"}[5m])[1h:1m])',  # a subquery
    'jobs_cpus{jobid="4242"} / on (jobid) jobs_cpu_seconds_total{jobid="4243"}',
    'label_replace(jobs_cpus{jobid="4242"}, "jobid", "5000", "", "")',  # her own series
    '{__name__=~"jobs_.*", jobid="4242"}',  # every series of her job
    '{jobid="4242"}',
    '-jobs_cpus{jobid="4242"} @ end() offset 5m',
    'topk(3, jobs_cpus{jobid="4242"})',
    'up', 'sum(up)', 'slurm_nodes{cluster="demo"}', '{__name__="slurm_up"}',
    'sum by (account) (slurm_account_gpus_alloc) / scalar(sum(slurm_gpus))',
    'max by (collector) (jobs_scrape_collector_duration_seconds{instance=~".*"})',
    'up{jobid="5000"}',  # a public metric stays public
    'time()', 'vector(1)', '1 + 1',
]

REFUSED = [
    ("sum(jobs_cpu_seconds_total)", "does not name its jobs"),
    ('{__name__=~"jobs_.*"}', "does not name its jobs"),
    ('count({jobid=~".+"})', "is not a list of job ids"),
    ('jobs_cpus{jobid="5000"}', "job 5000 is not yours"),
    ('jobs_cpus{jobid=~"4242|5000"}', "job 5000 is not yours"),
    ('jobs_cpus{jobid=~"(4242|5000)"}', "job 5000 is not yours"),
    ('jobs_cpus{jobid=~"42.*"}', "is not a list of job ids"),
    ('jobs_cpus{jobid=~".+"}', "is not a list of job ids"),
    ('jobs_cpus{jobid=~"4242|.*"}', "is not a list of job ids"),
    ('jobs_cpus{jobid=~"4242+"}', "is not a list of job ids"),  # + repeats: 42422, ...
    ('jobs_cpus{jobid=~"4242|"}', "is not a list of job ids"),  # "" matches unlabelled
    ('jobs_cpus{jobid=~"(?i)4242"}', "is not a list of job ids"),
    ('jobs_cpus{jobid=~"4242)|(5000"}', "is not a list of job ids"),
    ('jobs_cpus{jobid="4242|5000"}', "is not a job id"),
    ('jobs_cpus{jobid=""}', "is not a job id"),
    ('jobs_cpus{jobid="04242"}', "is not a job id"),  # not the label the exporter writes
    ('jobs_cpus{jobid=~"04242"}', "is not a job id"),
    ('jobs_cpus{jobid!="5000"}', "does not name its jobs"),
    ('jobs_cpus{jobid!~"5000"}', "does not name its jobs"),
    ('jobs_cpus{jobid="4242"} + jobs_cpus{jobid="5000"}', "job 5000 is not yours"),
    ('jobs_cpus{jobid="5000"} and on() jobs_cpus{jobid="4242"}', "job 5000 is not yours"),
    ('jobs_cpus{jobid="4242"} or jobs_cpus', "does not name its jobs"),
    ('jobs_cpus{jobid="4242" or instance="n1"}', "does not name its jobs"),
    ('label_replace(jobs_cpus{jobid="5000"}, "jobid", "4242", "", "")', "job 5000 is not yours"),
    ('label_replace(jobs_cpus, "jobid", "4242", "", "")', "does not name its jobs"),
    ("max_over_time(sum(jobs_cpus)[1h:1m])", "does not name its jobs"),
    ('max_over_time(jobs_cpus{jobid="5000"}[1h:])', "job 5000 is not yours"),
    ('absent(jobs_cpus{jobid=~"5.*"})', "is not a list of job ids"),
    ("node_cpu_seconds_total", "node_cpu_seconds_total is not a public metric"),
    ('node_cpu_seconds_total{jobid="4242"}', "is not a public metric"),
    ('jobs_cpus{jobid="99999"}', "job 99999 is not in the accounting database"),
    ("info(up)", "reads series the expression does not name"),
]


@pytest.mark.parametrize("query", ALLOWED)
def test_alice_may_send(query):
    assert verdict(query) is None


@pytest.mark.parametrize(("query", "reason"), REFUSED)
def test_alice_may_not_send(query, reason):
    got = verdict(query)
    assert got is not None and reason in got, got


def test_bob_may_not_read_alices_jobs_and_may_read_his_own():
    assert verdict('jobs_cpus{jobid="4242"}', user="bob") == "job 4242 is not yours"
    assert verdict('jobs_cpus{jobid="5000"}', user="bob") is None


def test_staff_pass_every_ownership_rule():
    for query, _ in REFUSED:
        assert guard.jobs_in_query(query, RULES, staff=True) == frozenset()


def test_the_ids_to_check_are_each_named_once():
    assert guard.jobs_in_query(f'jobs_cpus{HET} + jobs_cpus{{jobid="6002+1"}}', RULES) \
        == {"6002+0", "6002+1"}


def test_many_jobs_in_one_request_are_refused_before_any_lookup():
    ids = "|".join(str(n) for n in range(1000, 1000 + guard.MAX_JOBS + 1))
    with pytest.raises(Refused, match="names 101 jobs"):
        guard.jobs_in_query(f'jobs_cpus{{jobid=~"{ids}"}}', RULES)


def test_where_one_prometheus_holds_several_clusters_the_cluster_is_named():
    rules = Rules(public=RULES.public, cluster_label="cluster", cluster="demo")
    assert verdict('jobs_cpus{jobid="4242", cluster="demo"}', rules=rules) is None
    assert "does not name the cluster" in (verdict('jobs_cpus{jobid="4242"}', rules=rules) or "")
    assert "does not name the cluster" in (
        verdict('jobs_cpus{jobid="4242", cluster=~"demo|v24"}', rules=rules) or "")
    assert "does not name the cluster" in (
        verdict('jobs_cpus{jobid="4242", cluster="v24"}', rules=rules) or "")
    assert verdict('slurm_up{cluster="v24"}', rules=rules) is None


def test_cost_bounds_hold_for_everyone():
    small = Rules(public=RULES.public, max_nodes=10, max_points=100)
    with pytest.raises(Refused, match="more than the 10 nodes allowed"):
        guard.jobs_in_query(" + ".join(["up"] * 6), small, staff=True)
    assert guard.jobs_in_query(" + ".join(["up"] * 5), small) == frozenset()
    with pytest.raises(Refused, match="subquery asks for 3600 points"):
        guard.jobs_in_query('max_over_time(jobs_cpus{jobid="4242"}[1h:1s])', small, staff=True)
    with pytest.raises(Refused, match="subquery asks for 1440 points"):  # the default 1m step
        guard.jobs_in_query("max_over_time(up[1d:])", small, staff=True)
    guard.check_range(0, 100 * 15, 15, small)
    with pytest.raises(Refused, match="asks for 101 points per series"):
        guard.check_range(0, 101 * 15, 15, small)


def test_match_selectors_of_series_and_labels():
    assert guard.jobs_in_match(['jobs_info{jobid="4242"}', "slurm_up"], RULES) == {"4242"}
    with pytest.raises(Refused, match="does not name its jobs"):
        guard.jobs_in_match(["jobs_info"], RULES)
    with pytest.raises(BadExpression, match="is not a series selector"):
        guard.jobs_in_match(['sum(jobs_info{jobid="4242"})'], RULES)
    assert guard.jobs_in_match(["jobs_info"], RULES, staff=True) == frozenset()


@pytest.mark.parametrize("text", ["sum(", 'jobs_cpus{jobid="4242"', "rate(up)", ""])
def test_what_does_not_parse_is_refused_as_bad_data(text):
    with pytest.raises(BadExpression, match="cannot parse"):
        guard.jobs_in_query(text, RULES, staff=True)


def test_strings_are_not_structure_and_comments_do_not_hide_it():
    ids = "|".join(str(n) for n in range(1000, 1090))  # a long list counts as one
    assert guard.structure_length(f'jobs_cpus{{jobid=~"{ids}"}}') == len('jobs_cpus{jobid=~"}')
    assert guard.structure_length(r'up{a="x\"y", b=`c\`}') == len('up{a=", b=`}')
    # A quote inside a comment opens no string: what follows the line is counted.
    assert guard.structure_length('up # "\n+ up + "x"') == len('up # "\n+ up + "')


@pytest.mark.parametrize("text", ["1" + "+1" * 600, "(" * 600 + "up" + ")" * 600,
                                  "# " + "(" * 5000, '"' + "x" * 70000 + '"'])
def test_expressions_too_big_to_parse_safely_are_refused_unparsed(text):
    with pytest.raises(Refused, match="too long to check"):
        guard.jobs_in_query(text, RULES, staff=True)


def test_the_walk_knows_every_node_it_meets():
    query = ('topk(scalar(jobs_cpus{jobid="5000"}), max_over_time((-rate(jobs_cpus{jobid='
             '"4242"}[5m]) * 2)[1h:1m] offset 1m)) or label_join(up, "a", ",", "b")')
    assert "job 5000 is not yours" in (verdict(query) or "")  # topk's k reads series too


def test_the_walk_knows_every_node_type_of_the_parser():
    import promql_parser as pp

    kinds = {c for c in vars(pp).values()
             if isinstance(c, type) and issubclass(c, pp.Expr) and c is not pp.Expr}
    assert kinds == set(guard.CHILDREN)
