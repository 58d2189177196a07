// jobreport's Open OnDemand dashboard widget: the signed-in user's recent jobs from
// jobreport's JSON API (GET <api>, docs/api.md) as a small table, each job linked to its
// report. The page's own credentials go with the request: OnDemand's Apache, which
// proxies jobreport under the portal's origin, names the user to it (docs/ondemand.md).
//
// The ERB partial (_jobreport.html.erb) puts widget.html in an element whose
// data-jobreport-api is the API's URL (data-jobreport-rows: how many jobs, default 8)
// and runs this script right after it. Plain DOM, no library; every value the API sends
// is set as text, never as HTML.
(function () {
  "use strict";

  const root = document.currentScript.closest("[data-jobreport-api]");
  const api = new URL(root.dataset.jobreportApi, document.baseURI);
  const rows = Number(root.dataset.jobreportRows || 8);
  const status = root.querySelector(".jobreport-status");
  const table = root.querySelector(".jobreport-jobs");
  const all = root.querySelector(".jobreport-all");

  // A link the API gave (a path on its server) as a URL; anything but http(s) is dropped.
  function link(path) {
    const url = new URL(path, api);
    return url.protocol === "https:" || url.protocol === "http:" ? url.href : null;
  }

  function percent(ratio) {
    return ratio === null || ratio === undefined ? "—" : Math.round(ratio * 100) + "%";
  }

  function cell(tr, text, className) {
    const td = tr.insertCell();
    td.textContent = text;
    if (className) td.className = className;
    return td;
  }

  function render(body) {
    const tbody = table.tBodies[0];
    for (const job of body.jobs.slice(0, rows)) {
      const tr = tbody.insertRow();
      tr.className = "jobreport-job";
      tr.dataset.job = job.job_id;
      const a = document.createElement("a");
      a.textContent = job.job_id;
      const href = link(job.report_url);
      if (href) a.href = href;
      cell(tr, "").append(a);
      cell(tr, job.name || "—", "text-break");
      cell(tr, job.state);
      cell(tr, percent(job.cpu_efficiency), "text-end");
      cell(tr, percent(job.memory_efficiency), "text-end");
      cell(tr, job.gpus ? percent(job.gpu_utilization) : "no GPU", "text-end");
      const top = job.top_finding;
      cell(tr, top ? top.message : job.findings === 0 ? "none" : "—");
    }
    table.hidden = body.jobs.length === 0;
    status.textContent = body.jobs.length === 0
      ? "No jobs in the last days." : body.gaps.join(" ");
    const list = link(body.list_url);
    if (list) {
      all.href = list;
      all.hidden = false;
    }
  }

  async function load() {
    let response;
    try {
      response = await fetch(api, {credentials: "include",
                                   headers: {Accept: "application/json"}});
    } catch (err) {
      status.textContent = "jobreport cannot be reached right now.";
      return;
    }
    let body = null;
    try {
      body = await response.json();
    } catch (err) {
      // not JSON: a proxy's error page, or a login page in between
    }
    if (response.ok && body && Array.isArray(body.jobs)) {
      render(body);
    } else if (response.status === 401) {
      status.textContent = "jobreport does not know who you are: sign in there first.";
      all.href = new URL("../../login", api).href;  // the API is <jobreport>/api/v1/jobs
      all.textContent = "Sign in to jobreport";
      all.hidden = false;
    } else {
      const why = body && body.message ? body.message : "HTTP " + response.status;
      status.textContent = "jobreport could not list your jobs: " + why;
    }
  }

  load();
})();
