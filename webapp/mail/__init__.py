"""Report emails: who gets one, the durable outbox, and SMTP delivery."""
