#!/bin/sh
# EpilogSlurmctld=/etc/slurm/epilog-sync.sh (slurm.conf): nudge the ended-job sync as a
# job ends, for a lower latency than the one-minute timer. It must never make slurmctld
# wait: start the unit without blocking and always exit 0. A nudge that finds a sync
# already running is dropped; that run, or the timer's next one, picks the job up.
# With JOBREPORT_ADMIN_COMMENT that sync also writes the job's jobstats-format summary
# into its AdminComment (slurmctld itself takes no update of a job that has ended).
systemctl start --no-block jobreport-sync.service >/dev/null 2>&1 || true
exit 0
