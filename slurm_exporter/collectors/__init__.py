"""One collector per Slurm source (or per concern); each turns a parsed snapshot into
``slurm_*`` metric families and keeps no state between scrapes."""
