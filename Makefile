# meshlab: sudo make demo runs the default lab, sudo make test runs every test.
# sudo resets PATH, so find Go where the official installer puts it.
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
BIN := bin/meshlab
export CGO_ENABLED ?= 0
# Tests build the binary with `go`: keep it on PATH under sudo.
export PATH := $(dir $(GO)):$(PATH)

# Debian packages the lab needs at run time: iptables-restore (capture rules), curl (what
# the demo tells you to run inside a pod), util-linux's nsenter (meshlab exec enters a
# pod's namespaces with it) and tcpdump (the proxy image's, which Istio's mTLS migration
# task runs in istio-proxy). The tests also need gcc: -race needs cgo, and the reader's
# wget and python3 with jwcrypto, which the authn-policy task's gen-jwt.py runs on.

.PHONY: all build demo test test-short bench lint deps browser prometheus race-deps clean-labs fidelity istiod

all: build

build:
	$(GO) build -o $(BIN) ./cmd/meshlab
	$(GO) build -o $(dir $(BIN))meshlab-app ./cmd/meshlab-app
	@chmod 0755 $(BIN) $(dir $(BIN))meshlab-app

# deps installs what is missing, and only that, with apt-get.
deps:
	@missing=""; \
	command -v iptables-restore >/dev/null 2>&1 || missing="$$missing iptables"; \
	command -v curl >/dev/null 2>&1 || missing="$$missing curl"; \
	command -v nsenter >/dev/null 2>&1 || missing="$$missing util-linux"; \
	command -v tcpdump >/dev/null 2>&1 || missing="$$missing tcpdump"; \
	command -v wget >/dev/null 2>&1 || missing="$$missing wget"; \
	{ python3 -c 'import jwcrypto' || /usr/bin/python3 -c 'import jwcrypto'; } >/dev/null 2>&1 || missing="$$missing python3-jwcrypto"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# demo runs a lab in the foreground: make demo LAB=second SCENARIO=scenarios/labs/bookinfo.yaml
# (SCENARIO: a file or a built-in scenario name; default hello; LAB: default "default").
demo: deps build
	./$(BIN) up $(if $(LAB),--lab $(LAB)) $(SCENARIO)

# browser installs Debian's chromium and firefox-esr, which the dashboard's browser tests
# drive, when missing.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing: chromium (for the dashboard's browser tests)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	}
	@command -v firefox >/dev/null 2>&1 || { \
		echo "installing: firefox-esr (for the dashboard's browser tests)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq firefox-esr; \
	}

# prometheus installs Debian's prometheus, which a lab runs for Istio's
# samples/addons/prometheus.yaml (the metrics task's PromQL), when missing. A lab runs its
# own in the addon's pod: the package's host service is not wanted, so where systemd runs
# it is stopped and disabled.
prometheus:
	@command -v prometheus >/dev/null 2>&1 || { \
		echo "installing: prometheus (for samples/addons/prometheus.yaml in a lab)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; \
		if [ -d /run/systemd/system ]; then systemctl disable --now prometheus >/dev/null 2>&1 || true; fi; \
	}

# test runs every test, privileged ones included (they need root: run with sudo): the
# golangci-lint, the packages' own tests under the race detector, the end-to-end tests
# (which run meshlab's processes, so -race in the test binary would see nothing of them)
# and the fidelity checks against real Istio.
RACE_PKGS = $(shell $(GO) list ./... | grep -v '/e2e$$')
test: deps browser prometheus race-deps
	$(GO) vet ./...
	$(MAKE) lint
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 15m $(RACE_PKGS)
	$(MAKE) istiod
	$(GO) test -count=1 -timeout 30m ./e2e/...
	$(MAKE) fidelity

# race-deps installs gcc, which the race detector (cgo) needs, when missing.
race-deps:
	@command -v gcc >/dev/null 2>&1 || { \
		echo "installing: gcc (for go test -race)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev; \
	}

# fidelity holds meshlab to real Istio (docs/FIDELITY.md): per scenario, istiod's real
# generator (the test-only module fidelity/, which alone requires istio.io/istio) serves a
# meshlab proxy per sidecar, and meshlab's generator is diffed against it. It prints what
# each sidecar accepted and refused and the diff counts, and fails on a refusal or
# difference its known lists (fidelity/testdata/known) do not document.
# The ambient checks (istiod's WDS against meshlab's generator and ztunnel) run in a second
# go test of the same test binary with PILOT_ENABLE_AMBIENT=true: Istio fixes its ambient
# flags at package init, and they change what sidecars get. meshlab's ambientapi and
# Istio's workloadapi are linked together and share proto names: the second to register
# is only warned about.
FIDELITY_ENV := GOLANG_PROTOBUF_REGISTRATION_CONFLICT=warn
fidelity:
	cd fidelity && $(GO) vet . && $(FIDELITY_ENV) $(GO) test -count=1 -timeout 8m -v . && \
		$(FIDELITY_ENV) PILOT_ENABLE_AMBIENT=true $(GO) test -count=1 -timeout 4m -v -run '^TestAmbient' .

# istiod builds bin/meshlab-istiod: Istio's own istiod as a lab's control plane (`meshlab
# up --control-plane=istiod`), from the module istiod/ (which alone, with
# fidelity/, requires istio.io/istio) at the Istio version it pins. The first build compiles Istio
# (minutes on 2 cores); Go's build cache makes the next ones take seconds, so `make test`
# builds it before the end-to-end tests. ISTIO_VERSION=<istio.io/istio module version>
# builds another Istio in a scratch copy of the module (docs/ARCHITECTURE.md: the
# supported range); the checked-in go.mod is left as it is.
ISTIOD_BIN := bin/meshlab-istiod
ISTIO_VERSION ?=
istiod:
ifeq ($(ISTIO_VERSION),)
	cd istiod && $(GO) build -o ../$(ISTIOD_BIN) .
else
	rm -rf .istiod-build && mkdir .istiod-build && cp istiod/*.go istiod/go.mod istiod/go.sum .istiod-build/
	cd .istiod-build && $(GO) mod edit -dropreplace=k8s.io/api -dropreplace=k8s.io/apimachinery -dropreplace=k8s.io/client-go && \
		$(GO) get istio.io/istio@$(ISTIO_VERSION) && $(GO) build -mod=mod -o ../$(ISTIOD_BIN) .
	rm -rf .istiod-build
endif
	@chmod 0755 $(ISTIOD_BIN)

test-short:
	$(GO) test -count=1 -short ./...

# bench runs every benchmark (root: the e2e ones build labs), e.g. BenchmarkDataPath's
# fortio runs through the sidecars; pick some with BENCH=DataPath BENCHTIME=1x.
BENCH ?= .
BENCHTIME ?= 5x
bench: deps build
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -timeout 20m ./...

# lint runs golangci-lint with the checked-in .golangci.yml (installed with go install, pinned,
# when missing) over the module and the fidelity module.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(shell $(GO) env GOPATH)/bin/golangci-lint
lint:
	@test -x $(GOLANGCI_LINT) || { echo "installing: golangci-lint $(GOLANGCI_LINT_VERSION)"; \
		$(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION); }
	$(GOLANGCI_LINT) run --allow-parallel-runners ./...
	cd fidelity && $(GOLANGCI_LINT) run --allow-parallel-runners .

# clean-labs removes the leftovers of every lab you made whose process is gone (after a
# crash); running labs and other users' labs are left alone (meshlab clean --force kills one).
clean-labs: build
	./$(BIN) clean --all
