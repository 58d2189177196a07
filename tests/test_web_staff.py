"""Staff-only pages: others get 403; a user's page lists their alerts (escaped) and
cancellations, with the count of notices."""

from __future__ import annotations

import time

from tests.helpers.web import make_app, signed_in
from webapp.watch_records import AlertLog, Cancellation


def test_staff_pages_are_for_staff_and_list_alerts(web_settings):
    log = AlertLog(web_settings.outbox)
    for i in range(3):
        log.record_alert(f"k{i}", "demo", "bob", f"70{i}", "gpu_idle")
    log.record_cancellation("c", "demo", Cancellation(
        "bob", "teaching", "debug", "702", "gpu_idle", (("<b>GPUs</b>", "1"),), "cancelled",
        time.time()))
    log.close()
    app = make_app(web_settings)
    alice = signed_in(app, "alice")
    assert alice.get("/staff/report").status_code == 403
    assert alice.get("/staff/users/bob").status_code == 403
    staff = signed_in(app, "staffer")
    page = staff.get("/staff/users/bob").get_data(as_text=True)
    assert "3rd notice in 30 days" in page
    assert page.count('href="/jobs/70') == 4  # three alerts, one cancellation
    assert "&lt;b&gt;GPUs&lt;/b&gt;: 1" in page and "<b>GPUs" not in page
