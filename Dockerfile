# sf2loki container image: a static binary on distroless, running as uid 10001.
#
#   docker build -t sf2loki --build-arg VERSION=$(git describe --tags --always) .
#   docker run -v $PWD/config.yaml:/etc/sf2loki/config.yaml:ro -v sf2loki-state:/var/lib/sf2loki \
#     -p 8080:8080 sf2loki
#
# /var/lib/sf2loki holds the default state.file.path (state.json and its
# locks) and belongs to uid 10001; a named volume mounted there starts as a
# copy of it, so the checkpoints outlive the container. A host directory
# mounted there instead must be writable by uid 10001.
#
# The image needs no shell: `sf2loki health` is the health check. Configuration
# comes from /etc/sf2loki/config.yaml, from SF2LOKI_* environment variables,
# or both (environment wins); with environment only, run `sf2loki run`.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -tags disable_grpc_modules -trimpath -ldflags "-s -w -X github.com/sf2loki/sf2loki/internal/buildinfo.version=${VERSION} -X github.com/sf2loki/sf2loki/internal/buildinfo.commit=${COMMIT}" -o /out/sf2loki ./cmd/sf2loki
RUN mkdir -p /out/state/sf2loki

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sf2loki /usr/local/bin/sf2loki
# The directory of the default state.file.path: distroless has no shell to
# create it, and uid 10001 cannot create it under /var/lib.
COPY --from=build --chown=10001:10001 /out/state/ /var/lib/
USER 10001:10001
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 CMD ["/usr/local/bin/sf2loki", "health"]
ENTRYPOINT ["/usr/local/bin/sf2loki"]
CMD ["run", "--config", "/etc/sf2loki/config.yaml"]
