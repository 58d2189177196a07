#!/bin/sh
# Slurm Prolog snippet (slurm.conf: Prolog=/etc/slurm/prolog.d/*): record the GPUs Slurm
# allocated to this job so jobs-exporter attributes them by allocation, even if the job
# never touches them. slurmd runs it as root with SLURM_JOB_ID and SLURM_JOB_GPUS set.
# A failing prolog drains the node, so this script always exits 0.
dir=${JOBREPORT_EXPORTER_GPU_ALLOC_DIR:-/run/jobs-exporter/gpus}
case "${SLURM_JOB_ID:-}" in ''|*[!0-9]*) exit 0 ;; esac
gpus=${SLURM_JOB_GPUS:-}
case "$gpus" in ''|*[!0-9,-]*) exit 0 ;; esac
mkdir -p "$dir" 2>/dev/null || exit 0
tmp="$dir/.$SLURM_JOB_ID.$$"
# Write then rename: the exporter never reads a half-written file.
printf '%s\n' "$gpus" > "$tmp" 2>/dev/null && mv -f "$tmp" "$dir/$SLURM_JOB_ID" 2>/dev/null
rm -f "$tmp" 2>/dev/null
exit 0
