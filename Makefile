# sf2loki build, test and lint. `make test` is exactly what CI runs.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO        ?= go
BIN       := $(CURDIR)/.bin
PKG       := github.com/sf2loki/sf2loki
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -X $(PKG)/internal/buildinfo.version=$(VERSION) -X $(PKG)/internal/buildinfo.commit=$(COMMIT)

# Pinned tool versions. `make tools` installs each into .bin/ once.
GOLANGCI_LINT_VERSION := v2.15.0
VERSITYGW_VERSION     := v1.8.0
# etcd and kube-apiserver are built from the pinned tool modules in tools/
# (their go.mod files hold the versions; these name the stamps).
ETCD_VERSION          := v3.7.3
KUBE_APISERVER_VERSION := v1.37.2
VICTORIALOGS_VERSION  := v1.52.2
HELM_VERSION          := v3.22.0
PROMTOOL_VERSION      := v0.316.0
# The release tools (`make release-snapshot`; not needed by `make test`).
GORELEASER_VERSION    := v2.15.1
CYCLONEDX_GOMOD_VERSION := v1.10.0
# The Pub/Sub API code generators (protoc itself is Debian's protobuf-compiler).
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2

export PATH := $(BIN):$(PATH)

# disable_grpc_modules: cloud.google.com/go/storage's documented opt-out of
# its gRPC transport's DirectPath (xDS, Envoy's API, RLS), which the GCS
# store, on the JSON API, never uses. The Dockerfile, .goreleaser.yaml,
# scripts/size.sh and the tests' build pass it too (cmd/sf2loki checks).
BUILD_TAGS := disable_grpc_modules

.PHONY: build
build: ## Build bin/sf2loki
	CGO_ENABLED=0 $(GO) build -tags $(BUILD_TAGS) -trimpath -ldflags '$(LDFLAGS)' -o bin/sf2loki ./cmd/sf2loki

# test/integration is listed first: go test starts packages in the order
# given, and that one is the longest (about 11 minutes, mostly daemons
# waiting out leases), so the others run beside it rather than after it.
# Its results print first; the others' follow when it ends.
.PHONY: test
test: test-tools rules-test ## All tests with the race detector, and the Prometheus rules' tests (what CI runs)
	$(GO) test -race -count=1 -timeout 30m ./test/integration/ $$($(GO) list ./... | grep -v '/test/integration$$')

PROM_RULES := deploy/prometheus/sf2loki-rules.yaml

.PHONY: rules-test
rules-test: $(BIN)/.promtool-$(PROMTOOL_VERSION) ## promtool check rules and promtool test rules on deploy/prometheus
	$(BIN)/promtool check rules $(PROM_RULES)
	$(BIN)/promtool test rules deploy/prometheus/sf2loki-rules.test.yaml

# The Helm chart cannot read files outside its directory: it holds copies of
# the rules file and of the Grafana dashboards (a test in test/deploy checks
# that they are equal). make dashboards, and so make generate, runs it.
CHART_DIR := deploy/helm/sf2loki

.PHONY: chart-files
chart-files: ## Copy the Prometheus rules, the Grafana dashboards and the configuration schema into the Helm chart
	mkdir -p $(CHART_DIR)/files
	cp $(PROM_RULES) $(CHART_DIR)/files/sf2loki-rules.yaml
	rm -rf $(CHART_DIR)/dashboards
	if compgen -G 'deploy/grafana/*.json' >/dev/null; then mkdir -p $(CHART_DIR)/dashboards && cp deploy/grafana/*.json $(CHART_DIR)/dashboards/; fi
	$(GO) run ./cmd/chartschema -config-schema configs/sf2loki.schema.json -chart-schema $(CHART_DIR)/values.schema.json

SEEDS ?= 100000

.PHONY: sim
sim: ## The deterministic HA simulation over SEEDS seeds (default 100000), and the shard simulation over a tenth of them
	SF2LOKI_SIM_SEEDS=$(SEEDS) $(GO) test -count=1 -timeout 2h -run 'TestSimulation(Shards)?$$' -v ./internal/domain/

.PHONY: cover
cover: ## Coverage of the core packages
	$(GO) test -count=1 -cover ./internal/domain/... ./internal/ports/...

.PHONY: lint
lint: lint-tools ## go vet + golangci-lint (layering and clock rules included)
	$(GO) vet ./...
	$(BIN)/golangci-lint run ./...
	@# wire_gen.go must be what wire generates from wire.go (wire diff exits 1 otherwise).
	cd internal/app && $(GO) run -mod=mod github.com/google/wire/cmd/wire diff .

.PHONY: generate
generate: proto dashboards ## Regenerate wire_gen.go, the Pub/Sub API code, the Grafana dashboards, the example configuration, the configuration reference and its JSON Schema
	cd internal/app && $(GO) run -mod=mod github.com/google/wire/cmd/wire gen .
	$(GO) run ./cmd/sf2loki config example > configs/sf2loki.example.yaml
	$(GO) run ./cmd/sf2loki config reference > docs/config-reference.md
	$(GO) run ./cmd/sf2loki config schema > configs/sf2loki.schema.json
	$(MAKE) --no-print-directory chart-files

.PHONY: dashboards
dashboards: ## Regenerate the Grafana dashboards and their README in deploy/grafana (internal/dashboards)
	$(GO) run ./cmd/dashgen -out deploy/grafana
	$(MAKE) --no-print-directory chart-files

PUBSUB_PKG := $(PKG)/internal/adapters/salesforce/pubsub/eventbus

.PHONY: proto
proto: $(BIN)/.protoc-gen-go-$(PROTOC_GEN_GO_VERSION) $(BIN)/.protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION) ## Regenerate the Pub/Sub API code from third_party/pubsub-api
	@command -v protoc >/dev/null || { echo "protoc not found: install Debian's protobuf-compiler (apt-get install protobuf-compiler)" >&2; exit 1; }
	protoc -I third_party/pubsub-api --plugin=protoc-gen-go=$(BIN)/protoc-gen-go --plugin=protoc-gen-go-grpc=$(BIN)/protoc-gen-go-grpc \
		--go_out=internal/adapters/salesforce/pubsub/eventbus --go_opt=paths=source_relative '--go_opt=Mpubsub_api.proto=$(PUBSUB_PKG);eventbus' \
		--go-grpc_out=internal/adapters/salesforce/pubsub/eventbus --go-grpc_opt=paths=source_relative '--go-grpc_opt=Mpubsub_api.proto=$(PUBSUB_PKG);eventbus' \
		pubsub_api.proto
	@# The digest of the proto the code came from: a test fails when the proto changes without this.
	cd third_party/pubsub-api && sha256sum pubsub_api.proto > $(CURDIR)/internal/adapters/salesforce/pubsub/eventbus/pubsub_api.proto.sha256

$(BIN)/.protoc-gen-go-$(PROTOC_GEN_GO_VERSION):
	mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	touch $@

$(BIN)/.protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION):
	mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	touch $@

.PHONY: bench
bench: ## Micro-benchmarks (the daemon benchmarks are `make bench-ha`, `make bench-leader-election`, `make bench-elf`, `make bench-pubsub` and `make bench-latency`)
	$(GO) test -run '^$$' -bench . -benchmem $$($(GO) list ./... | grep -v /test/integration)

HA_REPEATS ?= 10

.PHONY: bench-ha
bench-ha: test-tools ## The HA benchmark table: commit throughput, request cost, footprint, failover matrix
	HA_REPEATS=$(HA_REPEATS) $(GO) test -count=1 -timeout 2h -run '^$$' -bench '^BenchmarkHA$$' -benchtime 1x ./test/integration/

.PHONY: bench-leader-election
bench-leader-election: $(BIN)/.etcd-$(ETCD_VERSION) $(BIN)/.kube-apiserver-$(KUBE_APISERVER_VERSION) ## sf2loki's k8s_lease beside client-go's leaderelection on one kube-apiserver: handover times, requests/s from the audit log (HA_REPEATS=10, HA_IDLE=30s)
	HA_REPEATS=$(HA_REPEATS) $(GO) test -count=1 -timeout 1h -run '^$$' -bench '^BenchmarkLeaderElection$$' -benchtime 1x ./test/integration/

.PHONY: bench-elf
bench-elf: test-tools ## The daemon on a 50 MB and a 150 MB EventLogFile into VictoriaLogs: rows/s and peak RSS
	$(GO) test -count=1 -timeout 30m -run '^$$' -bench '^BenchmarkEventLogFileDaemon$$' -benchtime 1x ./test/integration/

.PHONY: bench-pubsub
bench-pubsub: test-tools ## The daemon on 200,000 Pub/Sub events into VictoriaLogs: events/s and peak RSS
	$(GO) test -count=1 -timeout 30m -run '^$$' -bench '^BenchmarkPubSubDaemon$$' -benchtime 1x ./test/integration/

.PHONY: bench-ratio
bench-ratio: test-tools ## Pub/Sub events/s over EventLogFile rows/s on rows of similar size, into a discarding peer, in one run (RATIO_ROUNDS=3, PUBSUB_TOPICS=4, PUBSUB_EVENTS=600000)
	$(GO) test -count=1 -timeout 30m -run '^$$' -bench '^BenchmarkPubSubOverEventLogFile$$' -benchtime 1x ./test/integration/

.PHONY: bench-memory
bench-memory: ## The daemon with both lanes full and every push held: peak RSS, largest of 3 runs (GOMEMLIMIT=… to compare a soft limit)
	$(GO) test -count=1 -timeout 30m -run '^$$' -bench '^BenchmarkSaturatedLanes$$' -benchtime 3x ./test/integration/

.PHONY: bench-idle
bench-idle: ## A replica leading 1 and 20 idle synthetic orgs: RssAnon, RssFile, and RssAnon per extra shard (larger of 2 runs; IDLE_STORE=s3 for versitygw)
	$(GO) test -count=1 -timeout 30m -run '^$$' -bench '^BenchmarkIdleShards$$' -benchtime 2x ./test/integration/

.PHONY: size
size: ## The stripped daemon's size and its largest modules and packages (TOP=15)
	./scripts/size.sh

# The daemon benchmarks in the realistic-network mode (test/integration/latencybench_test.go):
# checkpoints in an object store behind a proxy adding STORE_LATENCY (30ms) to each request,
# pushes behind one adding PUSH_LATENCY (150ms). DAEMON_EXTRA_YAML, BENCH_COMMIT_INTERVAL and
# BENCH_MAX_IN_FLIGHT add configuration keys; NULL_PEER=1, ELF_ROWS, PUBSUB_EVENTS apply too.
LATENCY_BENCH := '^(BenchmarkEventLogFileDaemon|BenchmarkPubSubDaemon)$$'

.PHONY: bench-latency
bench-latency: bench-latency-s3 bench-latency-gcs ## The EventLogFile and Pub/Sub daemon benchmarks over a simulated network, S3 then GCS

.PHONY: bench-latency-s3
bench-latency-s3: test-tools ## Both daemon benchmarks, state on versitygw (+30ms a request), pushes +150ms: entries/s, checkpoint PUTs/min and per million entries, pushes/s
	LATENCY=1 STORE=s3 $(GO) test -count=1 -timeout 60m -run '^$$' -bench $(LATENCY_BENCH) -benchtime 1x ./test/integration/

.PHONY: bench-latency-gcs
bench-latency-gcs: test-tools ## The same on fake-gcs-server answering 429 to a second write to an object within 1s; counts the 429s
	LATENCY=1 STORE=gcs $(GO) test -count=1 -timeout 60m -run '^$$' -bench $(LATENCY_BENCH) -benchtime 1x ./test/integration/

SOAK ?= 10m

.PHONY: soak
soak: test-tools ## The chaos soaks (one lease, and shards) for SOAK each (default 10m; CI runs 60s each in make test)
	SOAK=$(SOAK) $(GO) test -count=1 -timeout 2h -run '^TestChaosSoak(Shards)?$$' -v ./test/integration/

.PHONY: demo
demo: build $(BIN)/.victoria-logs-$(VICTORIALOGS_VERSION) ## Run VictoriaLogs and two replicas with the synthetic source (Ctrl-C stops)
	./scripts/demo.sh

# goreleaser reads no commit from a checkout without a git remote (it gives
# "none"): there, the snapshot names the project's repository as origin.
NO_REMOTE := GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url GIT_CONFIG_VALUE_0=https://github.com/sf2loki/sf2loki

# Releases: goreleaser builds the archives, checksums and SBOMs from .goreleaser.yaml
# (the tagged release in .github/workflows/release.yml also pushes the image).
.PHONY: release-tools
release-tools: $(BIN)/.goreleaser-$(GORELEASER_VERSION) $(BIN)/.cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION)

.PHONY: release-snapshot
release-snapshot: release-tools ## The release for this commit into dist/ (archives, checksums, SBOMs; no tag, upload or image), then its checks
	$(if $(shell git remote 2>/dev/null),,$(NO_REMOTE)) goreleaser release --snapshot --clean --skip=docker
	$(GO) test -count=1 -tags release -run '^(TestReleaseSnapshot|TestReadmeInstall)$$' -v ./test/release/

.PHONY: image-test
image-test: ## Build deploy/image/Dockerfile with podman from dist/'s linux binary and run the image (after make release-snapshot)
	$(GO) test -count=1 -tags release -run '^TestImage$$' -v ./test/release/

$(BIN)/.goreleaser-$(GORELEASER_VERSION):
	mkdir -p $(BIN)
	CGO_ENABLED=0 GOBIN=$(BIN) $(GO) install -ldflags='-s -w' github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION)
	touch $@

$(BIN)/.cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION):
	mkdir -p $(BIN)
	CGO_ENABLED=0 GOBIN=$(BIN) $(GO) install -ldflags='-s -w' github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION)
	touch $@

.PHONY: tools
tools: lint-tools test-tools ## Install pinned tools and test servers into .bin/

.PHONY: lint-tools
lint-tools: $(BIN)/.golangci-lint-$(GOLANGCI_LINT_VERSION)

$(BIN)/.golangci-lint-$(GOLANGCI_LINT_VERSION):
	mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	touch $@

# Test servers. GCS needs none: the tests run fake-gcs-server in process.
.PHONY: test-tools
test-tools: $(BIN)/.versitygw-$(VERSITYGW_VERSION) $(BIN)/.etcd-$(ETCD_VERSION) $(BIN)/.kube-apiserver-$(KUBE_APISERVER_VERSION) $(BIN)/.victoria-logs-$(VICTORIALOGS_VERSION) $(BIN)/.helm-$(HELM_VERSION) \
	$(BIN)/.promtool-$(PROMTOOL_VERSION)

# helm renders the chart in deploy/helm for the deployment tests.
$(BIN)/.helm-$(HELM_VERSION):
	mkdir -p $(BIN)
	CGO_ENABLED=0 GOBIN=$(BIN) $(GO) install -ldflags='-s -w' helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	touch $@

# promtool checks and unit-tests the Prometheus rules in deploy/prometheus.
$(BIN)/.promtool-$(PROMTOOL_VERSION):
	mkdir -p $(BIN)
	CGO_ENABLED=0 GOBIN=$(BIN) $(GO) install -ldflags='-s -w' github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION)
	touch $@

# VictoriaLogs: a real log database that accepts Loki's push API (the Loki
# push peer for the pipeline tests and the demo).
$(BIN)/.victoria-logs-$(VICTORIALOGS_VERSION):
	mkdir -p $(BIN)
	CGO_ENABLED=0 GOBIN=$(BIN) $(GO) install -ldflags='-s -w' github.com/VictoriaMetrics/VictoriaLogs/app/victoria-logs@$(VICTORIALOGS_VERSION)
	touch $@

$(BIN)/.etcd-$(ETCD_VERSION):
	mkdir -p $(BIN)
	cd tools/etcdbin && $(GO) build -ldflags '-s -w' -o $(BIN)/etcd go.etcd.io/etcd/server/v3
	touch $@

$(BIN)/.kube-apiserver-$(KUBE_APISERVER_VERSION):
	mkdir -p $(BIN)
	cd tools/k8sbins && $(GO) build -ldflags '-s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_APISERVER_VERSION) -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37' \
		-o $(BIN)/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
	touch $@

$(BIN)/.versitygw-$(VERSITYGW_VERSION):
	mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)
	touch $@

.PHONY: clean
clean:
	rm -rf bin

.PHONY: help
help:
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "%-12s %s\n", $$1, $$2}'
