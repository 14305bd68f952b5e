# Usher: a small image that runs the server as a sidecar.
#
#   docker build -t usher .
#   docker run --rm -p 8080:8080 usher
#
# The build stage compiles a release binary with the Swift runtime and
# Foundation linked in statically (--static-swift-stdlib), so the runtime stage
# needs only libmicrohttpd12 and what it pulls in (gnutls and friends; libc,
# libstdc++ and libgcc_s are already in debian:bookworm-slim). Package.swift
# links it with the toolchain's lld and packed relative relocations (DT_RELR),
# which need glibc >= 2.36: bookworm's is 2.36.
# scripts/container-check proves the runtime stage without a Docker engine.

# The toolchain the code is tested with (Swift 6.3); any Swift >= 6.0 bookworm image may work.
ARG SWIFT_IMAGE=swift:6.3-bookworm

FROM ${SWIFT_IMAGE} AS build
RUN export DEBIAN_FRONTEND=noninteractive \
 && apt-get update -q \
 && apt-get install -y -q libmicrohttpd-dev pkg-config \
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
 && apt-get install -y -q --no-install-recommends libmicrohttpd12 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 usher \
 && useradd --uid 10001 --gid 10001 --no-log-init --home-dir /app --no-create-home --shell /usr/sbin/nologin usher
COPY --from=build /out/usher /usr/local/bin/usher
# Config/usher.json is found relative to the working directory; mount another
# file over it, or pass --config (or USHER_CONFIG).
WORKDIR /app
COPY Config/ /app/Config/
USER 10001:10001
# Inside a container, listen on every interface (the config file says 127.0.0.1).
ENV USHER_HOST=0.0.0.0
EXPOSE 8080
# No curl in the image: usher asks its own /readyz (200 when serving, 503 while
# shutting down). If you change USHER_PORT, change this URL too.
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/usher", "health", "http://127.0.0.1:8080"]
# SIGTERM (docker stop) shuts down gracefully within shutdown_grace_seconds (10 s by default).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/usher"]
CMD ["--config", "/app/Config/usher.json"]
