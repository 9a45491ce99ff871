# Switchboard image: a static binary on scratch, running as non-root.
#
#   docker build -t switchboard .                       # build from source (needs the golang image)
#
#   # or package a binary built outside (no registry needed):
#   mkdir -p dist/data && CGO_ENABLED=0 go build -o dist/switchboard ./cmd/switchboard
#   cp /etc/ssl/certs/ca-certificates.crt dist/
#   docker build --target prebuilt -t switchboard .
#
# The prebuilt stages come first on purpose: the classic builder builds
# every stage up to the target, so `--target prebuilt` never needs the
# golang image. The image serves remote (SSE, streamable HTTP) upstreams
# and the built-in demo server; it has no shell, node or python, so stdio
# servers such as `npx ...` need an image of your own with this binary.

ARG GO_IMAGE=golang:1.26-bookworm

FROM scratch AS runtime
ENV MCP_SERVER_HOST=0.0.0.0 \
    MCP_SERVER_PORT=8080 \
    MCP_SERVER_DATA_DIR=/data \
    MCP_SERVER_LOG_FORMAT=json \
    HOME=/data \
    PATH=/
EXPOSE 8080
USER 65532:65532
HEALTHCHECK --interval=30s --timeout=5s CMD ["/switchboard", "healthcheck"]
ENTRYPOINT ["/switchboard"]

# A binary built outside: dist/switchboard, dist/ca-certificates.crt (for
# https upstreams) and an empty dist/data/ in the build context.
FROM runtime AS prebuilt
COPY --chown=65532:65532 dist/data /data
COPY dist/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY dist/switchboard /switchboard

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/switchboard ./cmd/switchboard \
 && mkdir -p /out/data

FROM runtime AS final
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=build /out/switchboard /switchboard
