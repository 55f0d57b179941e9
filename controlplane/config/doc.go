// Package config loads scenario files: multi-document YAML holding Kubernetes Services,
// meshlab Workloads and (later) Istio objects. Load parses and validates a whole file
// before anything is created, collecting every problem with the file, object and field it
// concerns; Scenario.Build then turns the validated objects into a model.Model with
// deterministic addresses.
//
// A Service copied from a real cluster loads unchanged: fields meshlab does not use
// (clusterIP, sessionAffinity: None, status...) are accepted and ignored, while fields it
// cannot honour with a non-default value (type LoadBalancer, externalName...) are refused
// by name. Unknown fields are errors, as with kubectl's strict field validation.
package config
