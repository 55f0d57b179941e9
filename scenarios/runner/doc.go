// Package runner reads `kind: Lab` documents (meshlab.dev/v1alpha1), validates them against
// their scenario before anything starts, and runs their steps: actions that change the
// lab or send traffic, then checks that read the lab's real state (traffic answers, xDS
// status, proxy stats, epochs) and say PASS or FAIL with what they saw and expected.
//
// The runner drives a lab through the narrow Backend interface, which *lab.Lab
// implements (with LabBackend adding what the lab does not export), so checks are
// unit-tested against a fake.
package runner
