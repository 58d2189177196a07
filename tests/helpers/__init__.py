"""Shared test support: fakes and sample reports, the stack, browser and SMTP helpers."""
