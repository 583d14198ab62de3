# syntax=docker/dockerfile:1
# The Python services, one image per service from one file:
#   docker build -f docker/python.Dockerfile --target ingress .   (also: stream, batcher)
# ingress and stream carry no torch; the batcher carries torch (CPU build) and the model
# weights, fetched at build time so it runs offline.
ARG PYTHON_IMAGE=python:3.11.7-slim-bookworm

# --- build: a virtual environment with the package, without the model extra --------------------
FROM ${PYTHON_IMAGE} AS build-api
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/venv
COPY pyproject.toml README.md ./
COPY src ./src
COPY services ./services
COPY clients/python ./clients/python
COPY bench ./bench
RUN /opt/venv/bin/pip install .

# --- build: the same plus torch (CPU wheels) and transformers, and the weights -----------------
FROM build-api AS build-batcher
ARG MODEL_ID=distilbert-base-uncased-finetuned-sst-2-english
RUN /opt/venv/bin/pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
 && /opt/venv/bin/pip install ".[model]"
RUN /opt/venv/bin/python -m batcher.fetch --model-id "${MODEL_ID}" --to /opt/model

# --- runtime: slim, non-root ---------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin batchline
ENV PATH=/opt/venv/bin:${PATH} PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 LOG_FORMAT=json
USER 10001

FROM runtime AS ingress
COPY --from=build-api /opt/venv /opt/venv
EXPOSE 50051
HEALTHCHECK --interval=5s --timeout=3s --retries=5 CMD ["python", "-m", "batchline.healthcheck", "127.0.0.1:50051"]
CMD ["python", "-m", "ingress"]

FROM runtime AS stream
COPY --from=build-api /opt/venv /opt/venv
EXPOSE 50052
HEALTHCHECK --interval=5s --timeout=3s --retries=5 CMD ["python", "-m", "batchline.healthcheck", "127.0.0.1:50052"]
CMD ["python", "-m", "stream"]

FROM runtime AS batcher
COPY --from=build-batcher /opt/venv /opt/venv
COPY --from=build-batcher /opt/model /opt/model
ENV MODEL_BACKEND=hf MODEL_PATH=/opt/model HF_HUB_OFFLINE=1 BATCHER_HEALTH_PORT=50053
EXPOSE 50053
HEALTHCHECK --interval=5s --timeout=3s --start-period=60s --retries=5 CMD ["python", "-m", "batchline.healthcheck", "127.0.0.1:50053"]
CMD ["python", "-m", "batcher"]
