# Trellis container image: the single compiled binary on a slim Debian base.
#   docker build -t trellis .
#   docker run -d -p 8080:8080 -v trellis-data:/data trellis
# First start with no user prints a one-time setup link: `docker logs <container>`.
# Continuous backup: mount a Litestream configuration and set TRELLIS_LITESTREAM_CONFIG (docs/backup.md);
# the image carries the litestream executable.

# --- build: npm ci fetches Bun itself (dev dependency), bun build --compile makes dist/trellis
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build
# Litestream, from the npm package npm ci installed (@flydotio/litestream-linux-x64, an optional dependency: the only
# build the registry serves, so an arm64 image needs Litestream from elsewhere)
RUN cp node_modules/@flydotio/litestream-linux-*/litestream dist/litestream \
 && dist/litestream version

# --- runtime: glibc matches the build stage (both bookworm)
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 trellis \
 && useradd --system --uid 10001 --gid trellis --home-dir /data --shell /usr/sbin/nologin trellis \
 && mkdir -p /data \
 && chown trellis:trellis /data \
 && chmod 0700 /data
COPY --from=build /app/dist/trellis /usr/local/bin/trellis
COPY --from=build /app/dist/litestream /usr/local/bin/litestream
ENV TRELLIS_HOST=0.0.0.0 \
    TRELLIS_PORT=8080 \
    TRELLIS_DATA_DIR=/data
VOLUME /data
EXPOSE 8080
USER trellis
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
  CMD curl -fsS "http://127.0.0.1:${TRELLIS_PORT:-8080}/healthz" || exit 1
ENTRYPOINT ["trellis"]
CMD ["serve"]
