"""One SMTP connection, STARTTLS and login when configured: the outbox's sender."""

from __future__ import annotations

import smtplib
import ssl

from webapp.settings import Settings

SMTP_TIMEOUT = 30.0


class SmtpSender:
    """One SMTP connection (STARTTLS and login when configured)."""

    def __init__(self, settings: Settings) -> None:
        self.smtp = smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=SMTP_TIMEOUT)
        try:
            self.smtp.ehlo()
            if settings.smtp_starttls:
                self.smtp.starttls(context=ssl.create_default_context())
                self.smtp.ehlo()
            if settings.smtp_user:
                self.smtp.login(settings.smtp_user, settings.smtp_password)
        except BaseException:
            self.smtp.close()
            raise

    def send(self, from_addr: str, to_addr: str, data: bytes) -> None:
        """Returns only once the server has accepted the message (250 after DATA)."""
        self.smtp.sendmail(from_addr, [to_addr], data)

    def close(self) -> None:
        try:
            self.smtp.quit()
        except (OSError, smtplib.SMTPException):
            self.smtp.close()
