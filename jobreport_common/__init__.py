"""Small pieces both deployables share (the exporter and the web app import this, never
each other)."""
