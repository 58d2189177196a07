#!/bin/sh
# Slurm Epilog snippet (slurm.conf: Epilog=/etc/slurm/epilog.d/*): forget the job's GPU
# allocation recorded by slurm-prolog-gpus.sh. Always exits 0 (a failing epilog drains).
dir=${JOBREPORT_EXPORTER_GPU_ALLOC_DIR:-/run/jobs-exporter/gpus}
case "${SLURM_JOB_ID:-}" in ''|*[!0-9]*) exit 0 ;; esac
rm -f "$dir/$SLURM_JOB_ID" 2>/dev/null
exit 0
