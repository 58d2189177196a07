"""`jobreport watch`: rules on running jobs, alerts once per job and rule, enforcement."""
