# iceflight server image, used by docker-compose.yml (service `iceflight`).
#   docker build -t iceflight .
# The default command serves config/iceflight-polaris.toml, which expects the compose stack's
# Polaris and MinIO and their secrets in the environment; it names no user, so add one
# (`--user NAME:PASSWORD`, or [[server.user]] in your own config): the image holds no password.
# Pass other arguments to run any iceflight command instead, e.g.
#   docker run --rm -p 50051:50051 iceflight demo --listen 0.0.0.0:50051
# (the demo makes a random password at its first start and prints it).

FROM rust:1.95-bookworm AS builder
# aws-lc-sys (TLS of the HTTP clients) builds with cc; cmake is its fallback build system.
RUN apt-get update \
    && apt-get install -y --no-install-recommends cmake \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# dist/iceflight without debug sections; dist/iceflight.debug beside it in this stage
# (scripts/release.sh; docs/operations.md).
RUN scripts/release.sh

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --user-group --home-dir /var/lib/iceflight --create-home \
        --shell /usr/sbin/nologin iceflight
COPY --from=builder /src/dist/iceflight /usr/local/bin/iceflight
COPY config/iceflight-polaris.toml /etc/iceflight/iceflight.toml
USER iceflight
# Embedded catalog (catalog.db, warehouse/) and the working directory of every command.
WORKDIR /var/lib/iceflight
VOLUME ["/var/lib/iceflight"]
EXPOSE 50051
ENTRYPOINT ["iceflight"]
CMD ["--config", "/etc/iceflight/iceflight.toml", "serve", "--listen", "0.0.0.0:50051"]
