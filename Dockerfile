# Usher: a small image that runs the server as a sidecar.
#
#   docker build -t usher .
#   docker run --rm -v "$PWD/usher.json:/app/Config/usher.json:ro" usher
#
# By default it listens on loopback (127.0.0.1:8080): a sidecar's application
# shares the pod's network namespace. It starts with no resources unless a
# config file is mounted at /app/Config/usher.json (or named by --config or
# USHER_CONFIG); the demo config is for `make run` only. To reach it from
# outside the pod, set USHER_HOST=0.0.0.0 with a token and allowed_hosts
# (docs/operations.md, "The container image").
#
# The build stage compiles a release binary with the Swift runtime and
# Foundation linked in statically (--static-swift-stdlib), so the runtime stage
# needs only libmicrohttpd12 and what it pulls in (gnutls and friends) and
# libhiredis0.14 (bookworm's hiredis, for the Redis backend); libc, libstdc++
# and libgcc_s are already in debian:bookworm-slim. Package.swift
# links it with the toolchain's lld and packed relative relocations (DT_RELR),
# which need glibc >= 2.36: bookworm's is 2.36.
# scripts/container-check proves the runtime stage without a Docker engine.

# The toolchain the code is tested with (Swift 6.3); any Swift >= 6.0 bookworm image may work.
ARG SWIFT_IMAGE=swift:6.3-bookworm

FROM ${SWIFT_IMAGE} AS build
RUN export DEBIAN_FRONTEND=noninteractive \
 && apt-get update -q \
 && apt-get install -y -q libmicrohttpd-dev libhiredis-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /build
# Every target the manifest names must exist, even those not built here.
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
COPY Benchmarks/EngineBench ./Benchmarks/EngineBench
RUN swift build -c release --static-swift-stdlib --product usher \
 && install -D -m 0755 "$(swift build -c release --show-bin-path)/usher" /out/usher

FROM debian:bookworm-slim
RUN export DEBIAN_FRONTEND=noninteractive \
 && apt-get update -q \
 && apt-get install -y -q --no-install-recommends libmicrohttpd12 libhiredis0.14 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 usher \
 && useradd --uid 10001 --gid 10001 --no-log-init --home-dir /app --no-create-home --shell /usr/sbin/nologin usher
COPY --from=build /out/usher /usr/local/bin/usher
# No config in the image: usher serves Config/usher.json from the working
# directory when one is mounted there, else the defaults (no resources).
WORKDIR /app
USER 10001:10001
EXPOSE 8080
# No curl in the image: usher asks its own /readyz (200 when serving, 503 while
# shutting down) on loopback, at USHER_PORT (8080 when unset). A port set only
# in the config file needs USHER_PORT too, or another health check.
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 \
    CMD ["/bin/sh", "-c", "exec /usr/local/bin/usher health \"http://127.0.0.1:${USHER_PORT:-8080}\""]
# SIGTERM (docker stop) shuts down gracefully within shutdown_grace_seconds (10 s by default).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/usher"]
CMD ["serve"]
