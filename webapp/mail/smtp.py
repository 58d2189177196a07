"""One SMTP connection, STARTTLS and login when configured: the outbox's sender.

An address with non-ASCII characters goes out with SMTPUTF8 (RFC 6531) when the server
offers it; where it does not, that message is ``Undeliverable`` (the outbox fails it at
once, the reason on its row) and the session goes on with the next."""

from __future__ import annotations

import smtplib
import ssl

from webapp.mail.outbox import Undeliverable
from webapp.settings import Settings

SMTP_TIMEOUT = 30.0


class SmtpSender:
    """One SMTP connection (STARTTLS and login when configured)."""

    def __init__(self, settings: Settings) -> None:
        self.host = f"{settings.smtp_host}:{settings.smtp_port}"
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
        options: list[str] = []
        if not (from_addr.isascii() and to_addr.isascii()):
            if not self.smtp.has_extn("smtputf8"):  # from its EHLO answer
                raise Undeliverable(f"address {to_addr!r} or {from_addr!r} is not ASCII and "
                                    f"the SMTP server {self.host} does not offer SMTPUTF8")
            options = ["SMTPUTF8"]
        self.smtp.sendmail(from_addr, [to_addr], data, mail_options=options)

    def close(self) -> None:
        try:
            self.smtp.quit()
        except (OSError, smtplib.SMTPException):
            self.smtp.close()
