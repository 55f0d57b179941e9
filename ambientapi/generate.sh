#!/usr/bin/env bash
# Regenerates the .pb.go files from the .proto files beside them. Needs protoc (Debian's
# protobuf-compiler) and protoc-gen-go at the module's google.golang.org/protobuf version:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
set -euo pipefail
cd "$(dirname "$0")/.."
PATH="$(go env GOPATH)/bin:$PATH" protoc -I . -I /usr/include \
	--go_out=. --go_opt=module=github.com/meshlab/meshlab \
	ambientapi/workload/workload.proto ambientapi/security/authorization.proto ambientapi/zds/zds.proto
