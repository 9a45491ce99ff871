# Switchboard image from source: a static binary on scratch, running as
# non-root.
#
#   docker build -t switchboard .            # needs the golang image
#
# A binary built outside (no registry needed) goes through
# Dockerfile.prebuilt instead. Each file holds only the stages its build
# needs: the classic builder (Docker without BuildKit, Compose v1) builds
# every stage of a file up to the target, so a prebuilt stage here broke
# `docker build .` wherever dist/ did not exist. The image serves remote
# (SSE, streamable HTTP) upstreams and the built-in demo server; it has no
# shell, node or python, so stdio servers such as `npx ...` need an image
# of your own with this binary.

ARG GO_IMAGE=golang:1.26-bookworm

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${VERSION}" -o /out/switchboard ./cmd/switchboard \
 && mkdir -p /out/data

FROM scratch AS final
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
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=build /out/switchboard /switchboard
