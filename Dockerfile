# sf2loki container image: a static binary on distroless, running as uid 10001.
#
#   docker build -t sf2loki --build-arg VERSION=$(git describe --tags --always) .
#   docker run -v $PWD/config.yaml:/etc/sf2loki/config.yaml:ro -p 8080:8080 sf2loki
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
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/sf2loki/sf2loki/internal/app.version=${VERSION} -X github.com/sf2loki/sf2loki/internal/app.commit=${COMMIT}" -o /out/sf2loki ./cmd/sf2loki

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sf2loki /usr/local/bin/sf2loki
USER 10001:10001
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 CMD ["/usr/local/bin/sf2loki", "health"]
ENTRYPOINT ["/usr/local/bin/sf2loki"]
CMD ["run", "--config", "/etc/sf2loki/config.yaml"]
