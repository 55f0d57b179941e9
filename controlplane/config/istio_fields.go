package config

import (
	"strings"
	"sync"
)

// The Istio fields meshlab implements, by path of JSON names with list indexes dropped and
// map keys as "*". Every other field set in an object is refused by name.
var (
	virtualServiceFields  = lazyFields(virtualServicePaths)
	destinationRuleFields = lazyFields(destinationRulePaths)
	serviceEntryFields    = lazyFields(serviceEntryPaths)
	meshConfigFields      = lazyFields(func() string {
		return "outboundTrafficPolicy outboundTrafficPolicy.mode rootNamespace accessLogFile accessLogEncoding accessLogFormat trustDomain trustDomainAliases meshMTLS meshMTLS.minProtocolVersion certificates certificates.secretName certificates.dnsNames " +
			meshTracingPaths() + " " + // meshconfig_tracing.go
			meshProxyMetadataPaths() + " " + // proxymetadata.go
			meshAccessLogProviderPaths() // meshconfig_otelals.go
	})

	peerAuthenticationFields  = lazyFields(peerAuthenticationPaths)
	authorizationPolicyFields = lazyFields(authorizationPolicyPaths)
)

const stringMatch = "exact prefix regex"

func virtualServicePaths() string {
	return strings.Join([]string{
		"hosts gateways http tcp tls",
		"http.name http.match http.route http.timeout http.retries http.fault http.rewrite http.redirect",
		"http.mirror http.mirrorPercentage http.mirrorPercentage.value http.headers",
		expand("http.match", "name uri headers queryParams method sourceLabels port gateways"),
		expand("http.match.uri", stringMatch),
		expand("http.match.headers.*", stringMatch),
		expand("http.match.queryParams.*", stringMatch),
		expand("http.match.method", stringMatch),
		expand("http.route", "destination weight headers"),
		destination("http.route.destination"),
		headerOps("http.route.headers"),
		headerOps("http.headers"),
		expand("http.retries", "attempts perTryTimeout retryOn"),
		expand("http.fault", "delay abort"),
		expand("http.fault.delay", "fixedDelay percent percentage percentage.value"),
		expand("http.fault.abort", "httpStatus percentage percentage.value"),
		expand("http.rewrite", "uri authority"),
		expand("http.redirect", "uri authority redirectCode"),
		destination("http.mirror"),
		expand("tcp", "match route"),
		expand("tcp.match", "port"),
		expand("tcp.route", "destination weight"),
		destination("tcp.route.destination"),
		expand("tls", "match route"),
		expand("tls.match", "sniHosts port gateways"),
		expand("tls.route", "destination weight"),
		destination("tls.route.destination"),
	}, " ")
}

func destinationRulePaths() string {
	return strings.Join([]string{
		"host subsets trafficPolicy",
		expand("subsets", "name labels trafficPolicy"),
		trafficPolicy("trafficPolicy", true),
		trafficPolicy("subsets.trafficPolicy", true),
	}, " ")
}

func serviceEntryPaths() string {
	return strings.Join([]string{
		"hosts addresses ports location resolution endpoints",
		expand("ports", "number protocol name targetPort"),
		expand("endpoints", "address ports labels"),
	}, " ")
}

func peerAuthenticationPaths() string {
	return strings.Join([]string{
		"selector selector.matchLabels mtls mtls.mode portLevelMtls portLevelMtls.*.mode",
	}, " ")
}

func authorizationPolicyPaths() string {
	return strings.Join([]string{
		"selector selector.matchLabels action rules targetRef targetRefs",
		expand("targetRef", "group kind name namespace"),
		expand("targetRefs", "group kind name namespace"),
		expand("rules", "from to when"),
		"rules.from.source " + expand("rules.from.source", "principals notPrincipals namespaces notNamespaces requestPrincipals notRequestPrincipals ipBlocks notIpBlocks remoteIpBlocks notRemoteIpBlocks"),
		"rules.to.operation " + expand("rules.to.operation", "methods notMethods paths notPaths ports notPorts"),
		expand("rules.when", "key values notValues"),
	}, " ")
}

func destination(prefix string) string {
	return prefix + " " + expand(prefix, "host subset port port.number")
}

func headerOps(prefix string) string {
	return prefix + " " + expand(prefix, "request response") + " " +
		expand(prefix+".request", "set add remove") + " " + expand(prefix+".response", "set add remove")
}

func trafficPolicy(prefix string, portLevel bool) string {
	s := prefix + " " + strings.Join([]string{
		expand(prefix, "loadBalancer connectionPool outlierDetection tls"),
		expand(prefix+".tls", "mode sni caCertificates credentialName subjectAltNames clientCertificate privateKey"),
		expand(prefix+".loadBalancer", "simple"),
		expand(prefix+".connectionPool", "tcp http"),
		expand(prefix+".connectionPool.tcp", "maxConnections"),
		expand(prefix+".connectionPool.http", "http1MaxPendingRequests http2MaxRequests maxRequestsPerConnection"),
		expand(prefix+".outlierDetection", "consecutive5xxErrors interval baseEjectionTime maxEjectionPercent"),
	}, " ")
	if portLevel {
		pl := prefix + ".portLevelSettings"
		s += " " + pl + " " + expand(pl, "port port.number") + " " + strings.TrimPrefix(trafficPolicy(pl, false), pl+" ")
	}
	return s
}

// expand prefixes each space-separated name with prefix and a dot.
func expand(prefix, names string) string {
	f := strings.Fields(names)
	for i, n := range f {
		f[i] = prefix + "." + n
	}
	return strings.Join(f, " ")
}

// lazyFields is the fieldSet of paths, built on first use: a table built at package init
// would be built (and kept) in every process of the binary, every pod's agent, proxy and
// app too.
func lazyFields(paths func() string) func() map[string]bool {
	return sync.OnceValue(func() map[string]bool { return fieldSet(paths()) })
}

func fieldSet(paths string) map[string]bool {
	set := map[string]bool{}
	for _, p := range strings.Fields(paths) {
		set[p] = true
	}
	return set
}
