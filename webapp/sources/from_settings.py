"""The sources as the settings open them: one place that knows which setting goes where,
for the report service, the staff report, ``jobreport watch`` and the command line."""

from __future__ import annotations

from webapp.settings import Settings
from webapp.sources.gpu_metrics import gpu_metrics
from webapp.sources.prometheus import PrometheusSource
from webapp.sources.prometheus_http import make_session


def prometheus_from(settings: Settings, min_timeout: float = 0.0) -> PrometheusSource:
    """Prometheus at JOBREPORT_PROMETHEUS_URL with its credentials, TLS, node label and
    cluster label (the ``jobs_*`` series of ``settings.cluster`` alone, where one
    Prometheus holds several clusters') and the GPU figures' source
    (JOBREPORT_GPU_METRICS). ``min_timeout``: bulk readers (the staff
    report's window) wait at least this long."""
    return PrometheusSource(
        settings.prometheus_url,
        timeout=max(settings.prometheus_timeout, min_timeout),
        scrape_interval=settings.scrape_interval,
        node_label=settings.prometheus_node_label,
        cluster_label=settings.prometheus_cluster_label,
        cluster=settings.cluster,
        gpu_metrics=gpu_metrics(settings.gpu_metrics),
        session=make_session(
            user=settings.prometheus_user,
            password_file=settings.prometheus_password_file,
            token_file=settings.prometheus_token_file,
            ca_bundle=settings.prometheus_ca_bundle,
            client_cert=settings.prometheus_client_cert,
            client_key=settings.prometheus_client_key,
        ),
    )
