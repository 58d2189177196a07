# jobreport's report service: gunicorn serving webapp:create_app() on JOBREPORT_BIND
# (0.0.0.0:8000 here), and every `jobreport` command (sync, watch, digest...) as a second
# command of the same image. Built from what `make dist` leaves in dist/: the project's
# wheel and the locked runtime dependencies (requirements.txt, hash-checked), so
# the build downloads nothing from PyPI and holds no test or lint tool:
#   make dist && docker build -t jobreport .     (or `make image`: podman, docs/deploying.md)
# (RUN --mount: BuildKit, Docker's default builder since 23.0, or podman/buildah.)
# Configuration comes from JOBREPORT_* variables (docs/settings.md); JOBREPORT_SECRET_KEY
# (or JOBREPORT_SECRET_KEY_FILE) is required, the app refuses to start without it.
# Step data (TotalCPU, MaxRSS) comes from slurmrestd (JOBREPORT_SACCT_SOURCE=slurmrestd,
# a token file mounted) or from sacct: mount the site's sacct, its libraries, slurm.conf
# and the munge socket and set JOBREPORT_SACCT; without either, reports carry a visible
# "sacct data unavailable" note and take CPU and memory from Prometheus.
ARG BASE=docker.io/library/debian:12-slim
FROM ${BASE}
LABEL org.opencontainers.image.title=jobreport \
      org.opencontainers.image.description="Per-job usage reports for Slurm clusters: the report service"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/jobreport/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    MPLCONFIGDIR=/tmp/matplotlib \
    JOBREPORT_BIND=0.0.0.0:8000

# Debian's Python 3.11 (the version the lock is for) and LaTeX for the PDF report:
# pdflatex and the Latin Modern fonts.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       python3 python3-venv texlive-latex-base lmodern \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb

# Runtime dependencies only, each file checked against the lock's hashes. PyLaTeX comes as
# an sdist: pip builds it in an isolated environment from the setuptools and wheel of
# requirements/build.txt, also in dist/wheels, which never enter the venv.
# The lock stays in the image (what its venv holds); the files are bound from the build
# context, not copied, so no layer keeps them (the lock's content decides the layer cache).
COPY requirements.txt /opt/jobreport/requirements.txt
RUN --mount=type=bind,source=dist/wheels,target=/tmp/wheels \
    python3 -m venv /opt/jobreport/venv \
    && pip install --no-cache-dir --disable-pip-version-check --no-index --find-links /tmp/wheels \
       --require-hashes -r /opt/jobreport/requirements.txt

# The project: the wheel `python -m build` made (templates inside it, nothing from /src).
COPY dist/jobreport-*.whl /tmp/
RUN pip install --no-cache-dir --disable-pip-version-check --no-index --no-deps /tmp/jobreport-*.whl \
    && rm -f /tmp/jobreport-*.whl \
    && useradd --system --home-dir /app --shell /usr/sbin/nologin jobreport \
    && mkdir -p /app/var && chown jobreport /app/var

# State (archive, outbox, web sessions, PDF cache: var/ by default) lives in /app/var, a
# volume shared by the web app and the commands; /etc/jobreport/jobreport.conf is read
# where one is mounted.
WORKDIR /app
VOLUME /app/var
USER jobreport

EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s \
    CMD python3 -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ['JOBREPORT_BIND'].rsplit(':', 1)[1], timeout=4)"
# Behind a reverse proxy that terminates TLS (deploy/nginx-jobreport.conf); publish the
# port on loopback only, e.g. docker run -p 127.0.0.1:8000:8000 ...
# No control socket: nothing manages gunicorn from inside the container.
CMD ["sh", "-c", "exec gunicorn -b \"$JOBREPORT_BIND\" -w 2 --timeout 60 --no-control-socket --access-logfile - 'webapp:create_app()'"]
