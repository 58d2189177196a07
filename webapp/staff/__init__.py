"""The staff report: who wasted what over a window, from the window's jobs (``data``) or
the archive (``archived``), as ranked tables (``tables``, ``build``), wired from settings
(``service``) and rendered as text and JSON (``render``)."""
