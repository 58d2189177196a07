"""jobreport: per-job usage reports for Slurm clusters."""
