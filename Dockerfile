# jobreport web app: gunicorn serving webapp:create_app() on port 8000.
# Configuration comes from JOBREPORT_* variables (see the README's settings table);
# JOBREPORT_SECRET_KEY is required, the app refuses to start without it.
# Step data (TotalCPU, MaxRSS) comes from sacct: mount the site's sacct, its libraries,
# slurm.conf and the munge socket into the container and set JOBREPORT_SACCT, or reports
# carry a visible "sacct data unavailable" note and take CPU and memory from Prometheus.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MPLCONFIGDIR=/tmp/matplotlib \
    JOBREPORT_OUTBOX=/app/var/outbox.sqlite

# LaTeX for the PDF report: pdflatex, Latin Modern fonts, latexmk for the second pass.
RUN apt-get update \
    && apt-get install -y --no-install-recommends texlive-latex-base lmodern latexmk \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt

# The project as a wheel: templates ship inside it (webapp/templates), nothing runs from /src.
COPY pyproject.toml README.md /src/
COPY webapp/ /src/webapp/
COPY templates/ /src/templates/
COPY mgmt/ /src/mgmt/
COPY exporter/ /src/exporter/
COPY jobreport_net/ /src/jobreport_net/
RUN pip install --no-cache-dir --no-deps /src && rm -rf /src

RUN useradd --system --home-dir /app --shell /usr/sbin/nologin jobreport \
    && mkdir -p /app/var && chown jobreport /app/var
USER jobreport

EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"
# Behind a reverse proxy that terminates TLS (deploy/nginx-jobreport.conf); publish the
# port on loopback only, e.g. docker run -p 127.0.0.1:8000:8000 ...
CMD ["gunicorn", "-b", "0.0.0.0:8000", "-w", "2", "--timeout", "60", "--access-logfile", "-", "webapp:create_app()"]
