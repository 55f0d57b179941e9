// Package repro exports a running lab as one reproducible file and compares a rebuilt
// lab with what the file recorded.
//
// # Format
//
// A repro file is a lab file (see package scenarios/runner): YAML documents separated by "---".
//
//   - The first document is a `kind: Lab` (apiVersion meshlab.dev/v1alpha1) with no
//     spec.scenario, so the other documents of the file are the lab's scenario. Its one
//     step checks that every sidecar is SYNCED, so `meshlab lab run FILE` rebuilds the
//     lab and checks it. Its annotation "meshlab.dev/repro" (AnnotationKey) holds the
//     recorded facts as indented JSON (Facts): when and from which lab the file was
//     exported, and per pod the data plane and proxy version, the capture rules
//     (`iptables-save -t nat` without counters) and the xDS history the control plane
//     kept: each config version with, per type, the resource count and ACK/NACK. The
//     scenario loader skips `kind: Lab` documents, so `meshlab up FILE` reads the file too.
//   - Every other document is one object of the lab as it was applied when exported
//     (Services, Workloads, MeshConfig, Istio objects, in the lab's order), written as
//     its author wrote it.
//
// `meshlab repro export` writes the file from a running lab's API; `meshlab repro run`
// brings the file up like `meshlab up`, collects the same facts from the new lab and
// prints, pod by pod, where they differ from the recorded ones (Compare).
package repro
