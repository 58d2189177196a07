"""``jobreport sync``: ended jobs, oldest end first, into the archive and the outbox.

Above the mailer and the report service (it drives both), below the command line.
"""
