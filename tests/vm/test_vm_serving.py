"""One jobreport serves the stack's cluster and both VM clusters: the sync walks each
cluster's ended jobs into the one archive, and the stack's web app (gunicorn, a real
login) shows a VM job under its cluster and offers every cluster in the lookup."""

from __future__ import annotations

from tests.helpers import stack, vm
from webapp.archive.store import Archive


def test_the_sync_archives_each_clusters_jobs_in_the_one_archive(vm_jobs, vm_env, tmp_path):
    env = {**vm_env, "JOBREPORT_ARCHIVE_URL": str(tmp_path / "archive.sqlite")}
    for cluster in vm.CLUSTERS:
        run = stack.jobreport("sync", "--cluster", cluster, "--jobid",
                              vm_jobs[cluster]["busy"], "--direction", "archive", env=env)
        assert run.returncode == 0, run.stdout + run.stderr
    archive = Archive(env["JOBREPORT_ARCHIVE_URL"])
    for cluster in vm.CLUSTERS:
        busy = vm_jobs[cluster]["busy"]
        archived = archive.get(cluster, busy)
        assert archived is not None, (cluster, busy)
        assert archived.user == "alice" and archived.state == "COMPLETED"
        assert archived.summary["cluster"] == cluster
    bad = stack.jobreport("sync", "--cluster", "nowhere", env=env)
    assert bad.returncode == 2 and "unknown cluster 'nowhere'" in bad.stderr


def test_the_web_app_serves_a_vm_job_under_its_cluster(vm_jobs, vm_env):
    base = "http://" + vm_env["JOBREPORT_BIND"]
    session = stack.login(base, "staff")
    for cluster in vm.CLUSTERS:
        busy = vm_jobs[cluster]["busy"]
        page = session.get(f"{base}/c/{cluster}/jobs/{busy}", timeout=120)
        assert page.status_code == 200, page.text[:500]
        assert f"{busy} on {cluster}" in page.text
        assert vm.node(cluster) in page.text
        lookup = session.get(f"{base}/?job={busy}&cluster={cluster}", timeout=30,
                             allow_redirects=False)
        assert lookup.headers["Location"].endswith(f"/c/{cluster}/jobs/{busy}")
    home = session.get(f"{base}/", timeout=60).text
    for cluster in (vm_env["JOBREPORT_CLUSTER"], *vm.CLUSTERS):
        assert f"<option>{cluster}</option>" in home, cluster
