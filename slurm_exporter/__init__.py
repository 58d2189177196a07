"""slurm-exporter: cluster-wide Slurm metrics (nodes, GPUs, queue, fair share, scheduler)."""
