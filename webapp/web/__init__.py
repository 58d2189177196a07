"""The Flask app: login, the job pages in four formats, errors and security headers."""
