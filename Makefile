# oce — make help lists every target.
SHELL := /bin/bash
GO ?= go
BIN := bin
TEST_TIMEOUT ?= 45m

.PHONY: help build test test-short cold-test bench chaos lint fuzz runtimes k8s-testenv helm images chromium oidc-provider promtool screenshots demo clean

help: ## list every target
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-14s %s\n", $$1, $$2}'

build: ## build every binary into bin/
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

runtimes: ## install the pinned Node, OpenClaw, Codex and tini into the shared cache
	@bash scripts/runtimes.sh >/dev/null

k8s-testenv: ## build the pinned test control plane, kubelet, kube-proxy and containerd into the shared cache (apt: runc, CNI plugins, iptables)
	@bash scripts/k8s-testenv/build.sh >/dev/null
	@bash scripts/k8s-testenv/node.sh >/dev/null

helm: ## build the pinned Helm CLI (helm.sh/helm/v4 v4.3.2) from the Go module proxy into the shared cache (the chart's tests)
	@bash scripts/helm.sh >/dev/null

images: ## build the coordinator, gateway and harness images without a registry (OCI archives in the shared cache)
	@bash scripts/images.sh >/dev/null

chromium: ## install headless Chromium (Debian) for the console's browser tests
	@bash scripts/chromium.sh

oidc-provider: ## build the pinned OpenID provider (zitadel/oidc) the console's single sign-on test signs in through, into the shared cache
	@bash scripts/oidc-provider/build.sh >/dev/null

promtool: ## build the pinned promtool (Prometheus rule checks and rule unit tests) into the shared cache
	@bash scripts/promtool.sh >/dev/null

test: runtimes k8s-testenv helm images chromium oidc-provider promtool ## run every test (real runtimes in loopback-only namespaces, a real kube-apiserver)
	$(GO) vet ./...
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

cold-test: ## make test as a new machine runs it: a fresh clone with empty HOME and caches; per-step and per-package wall times
	@bash scripts/cold-test.sh

test-short: ## unit tests only (no real runtimes)
	$(GO) test -count=1 -short ./...

bench: runtimes k8s-testenv images chromium ## run the benchmarks that docs/PERFORMANCE.md reports
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./...

chaos: ## long history-checked chaos run of 3 coordinators (CHAOS_DURATION, default 10m; CHAOS_SEED=N replays a run)
	CHAOS_DURATION=$${CHAOS_DURATION:-10m} $(GO) test -count=1 -v -run '^TestChaos$$' -timeout $${CHAOS_TIMEOUT:-90m} ./coordinator/clustertest/

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

fuzz: ## run each fuzz target for FUZZTIME (default 30s)
	@bash scripts/fuzz.sh $${FUZZTIME:-30s}

screenshots: runtimes chromium ## refresh docs/console/*.png from the console's browser test
	OCE_UPDATE_SCREENSHOTS=1 $(GO) test -count=1 -timeout 30m -run 'TestConsole' ./e2e/

demo: build runtimes ## quickstart: start oce on the embedded default and deploy an Agent
	@bash scripts/demo.sh

clean: ## remove built binaries
	rm -rf $(BIN)
