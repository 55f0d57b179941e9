// Package config loads scenario files: multi-document YAML holding Kubernetes Services,
// meshlab Workloads, Istio networking and security objects and meshlab's MeshConfig. Load parses and
// validates a whole file before anything is created, collecting every problem with the
// file, object and field it concerns; Scenario.Build then turns the validated objects into
// a model.Model with deterministic addresses. Scenario.Apply and Scenario.Delete change a
// running lab's objects: they return a new, wholly validated Scenario and never modify
// the old one, so a rejected change changes nothing.
//
// A Service copied from a real cluster loads unchanged: fields meshlab does not use
// (clusterIP, sessionAffinity: None, status...) are accepted and ignored, while fields it
// cannot honour with a non-default value (type LoadBalancer, externalName...) are refused
// by name. Unknown fields are errors, as with kubectl's strict field validation.
//
// Istio objects (VirtualService, DestinationRule, ServiceEntry of networking.istio.io
// v1alpha3, v1beta1 or v1) are parsed with istio.io/api's types: the spec goes through
// protojson, so anything valid in Istio's schema parses (durations may be written as Go
// durations, "500ms", as Istio accepts them). Unknown fields are errors naming their full
// path; fields meshlab does not implement are refused by name (istio_fields.go lists those
// it does); the rest is validated as Istio's validation does (istio_validate.go), and
// references between objects are checked (istio_refs.go): every host names a Service or
// a ServiceEntry host, every subset is defined by a DestinationRule, every port exists.
// In the model, hosts are resolved to FQDNs (as istiod resolves short names) and STATIC
// ServiceEntry endpoints naming a pod carry its IP; the objects keep what was written.
//
// PeerAuthentication and AuthorizationPolicy (security.istio.io v1beta1 or v1) are read the
// same way (security_validate.go): port-level mTLS needs a selector, AuthorizationPolicy
// ports are numbers, "*" may only be a whole value, a prefix or a suffix, when keys are
// request.headers[<name>], and a mesh has at most one mesh-wide PeerAuthentication (no
// selector, in the root namespace). In the model a selector without matchLabels is nil.
// DestinationRule tls.mode may be DISABLE, ISTIO_MUTUAL, SIMPLE or MUTUAL (client
// certificates from the Secret credentialName names; file paths are refused).
//
// Mesh-wide settings live in one optional object, Istio's MeshConfig as meshlab reads it:
//
//	apiVersion: meshlab.dev/v1alpha1
//	kind: MeshConfig
//	metadata: {name: mesh}
//	spec:
//	  outboundTrafficPolicy: {mode: REGISTRY_ONLY}   # or ALLOW_ANY, the default
//	  rootNamespace: istio-system                    # the default
//	  accessLogFile: /dev/stdout                     # the default; "" turns access logs off
//	  accessLogEncoding: TEXT                        # or JSON
//	  accessLogFormat: ""                            # "": Istio's default format of the encoding
//	  trustDomain: cluster.local                     # the default
//	  trustDomainAliases: [old-td]                   # trust domains taken as the mesh's own
//	  meshMTLS: {minProtocolVersion: TLSV1_3}        # inbound mTLS takes TLS 1.3 only
//	  certificates: [{secretName: dns.a, dnsNames: [a.istio-system.svc]}] # DNS certificates in Secrets
//
// Its spec is istio.io/api's mesh.v1alpha1.MeshConfig; only outboundTrafficPolicy,
// rootNamespace, the three access log fields, trustDomain, trustDomainAliases and
// meshMTLS.minProtocolVersion are implemented, every other field is refused by name. Unlike Istio's default profile (and like its demo profile), access logs
// are on unless accessLogFile is written as "".
package config
