package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// squidProxyLogLine is the sidecar's access log line of a connection to the proxy, in
// Istio's default format today (the page prints 2018's, without
// %RESPONSE_CODE_DETAILS%, %CONNECTION_TERMINATION_DETAILS% and the upstream failure
// reason): TCP ("- - -"), no code, bytes both ways, the proxy's address and the entry's
// cluster outbound|3128||my-company-proxy.com.
var squidProxyLogLine = regexp.MustCompile(`(?m)^\[\S+\] "- - -" 0 - - - "-" \d+ \d+ \d+ - "-" "-" "-" "-" "\d+\.\d+\.\d+\.\d+:3128" outbound\|3128\|\|my-company-proxy\.com \S+ \d+\.\d+\.\d+\.\d+:3128 `)

// TestDocsEgressHTTPProxyTask walks "Use an External HTTPS Proxy"
// (tasks/traffic-management/egress/http-proxy) as its snips.sh writes it, on Istio's
// curl sample: Istio's demo profile, curl in default (sidecar); the namespace external
// (no injection label: outside the mesh), the page's proxy.conf as the ConfigMap
// proxy-configmap, squid (sameersbn/squid, meshlab's squid persona reading that
// squid.conf) and curl in external. curl in external reaches
// https://en.wikipedia.org/wiki/Main_Page through squid (HTTPS_PROXY=$PROXY_IP:3128:
// CONNECT), and squid's access.log, tailed in its pod, has the page's TCP_TUNNEL/200
// CONNECT en.wikipedia.org:443 line. Then the page's ServiceEntry for the proxy
// ($PROXY_IP/32, TCP 3128, MESH_EXTERNAL, resolution NONE): the sidecar's curl gets the
// title through squid, the sidecar's access log shows the TCP connection to
// outbound|3128||my-company-proxy.com, squid's log a second tunnel. Then the page's
// cleanup. Wikipedia is the lab's outside world, squid a pod of the lab: nothing leaves
// it.
func TestDocsEgressHTTPProxyTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	// The page writes proxy.conf in its working directory: one of the test's own, with
	// samples/ linked to the module's (which stays unchanged).
	dir := t.TempDir()
	if err := os.Symlink(testutil.IstioSamples(t), filepath.Join(dir, "samples")); err != nil {
		t.Fatal(err)
	}
	p := &pageLab{docsLab: startDocsLab(t), samples: dir}
	p.sh(`istioctl install --set profile=demo -y
kubectl label namespace default istio-injection=enabled --overwrite
kubectl apply -f samples/curl/curl.yaml`)
	p.until("curl's one pod", func() string { return p.sh(`kubectl get pod -l app=curl -o jsonpath={.items..metadata.name}`) },
		func(s string) bool { return strings.HasPrefix(s, "curl-") && !strings.Contains(s, " ") })
	const source = `export SOURCE_POD=$(kubectl get pod -l app=curl -o jsonpath={.items..metadata.name})` + "\n"

	if out := p.sh(`kubectl create namespace external`); out != "namespace/external created\n" {
		t.Errorf("create namespace external printed %q", out)
	}
	p.sh(`cat <<EOF > ./proxy.conf
http_port 3128

acl SSL_ports port 443
acl CONNECT method CONNECT

http_access deny CONNECT !SSL_ports
http_access allow localhost manager
http_access deny manager
http_access allow all

coredump_dir /var/spool/squid

max_filedescriptors 1024
EOF`)
	if out := p.sh(`kubectl create configmap proxy-configmap -n external --from-file=squid.conf=./proxy.conf`); out != "configmap/proxy-configmap created\n" {
		t.Errorf("create configmap printed %q", out)
	}
	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: squid
  namespace: external
spec:
  replicas: 1
  selector:
    matchLabels:
      app: squid
  template:
    metadata:
      labels:
        app: squid
    spec:
      volumes:
      - name: proxy-config
        configMap:
          name: proxy-configmap
      containers:
      - name: squid
        image: sameersbn/squid:3.5.27
        imagePullPolicy: IfNotPresent
        volumeMounts:
        - name: proxy-config
          mountPath: /etc/squid
          readOnly: true
EOF`); !strings.HasPrefix(out, "deployment.apps/squid created\n") {
		t.Errorf("apply squid printed %q", out)
	}
	p.sh(`kubectl apply -n external -f samples/curl/curl.yaml`)
	p.until("squid's and external's curl's pods", func() string {
		return p.sh(`kubectl get pod -n external -l app=squid -o jsonpath={.items..podIP}; echo; kubectl get pod -n external -l app=curl -o jsonpath={.items..metadata.name}`)
	}, func(s string) bool {
		return regexp.MustCompile(`^\d+\.\d+\.\d+\.\d+\ncurl-\S+$`).MatchString(s)
	})
	// Outside the mesh: external's pods have no sidecar (READY 1/1).
	if out := p.sh(`kubectl get pod -n external`); strings.Contains(out, "2/2") {
		t.Errorf("external's pods have sidecars, want none (the namespace has no injection label):\n%s", out)
	}
	const proxyVars = `export PROXY_IP="$(kubectl get pod -n external -l app=squid -o jsonpath={.items..podIP})"
export PROXY_PORT=3128
`
	const title = "<title>Wikipedia, the free encyclopedia</title>\n"
	// curl without -s prints its progress meter on stderr (stdout is the pipe): the
	// page's output is stdout's.
	stdout := func(lines string) func() string {
		return func() string {
			out, _ := p.command(lines).Output()
			return string(out)
		}
	}
	p.until("the page's title through squid", stdout(proxyVars+`kubectl exec "$(kubectl get pod -n external -l app=curl -o jsonpath={.items..metadata.name})" -n external -- sh -c "HTTPS_PROXY=$PROXY_IP:$PROXY_PORT curl https://en.wikipedia.org/wiki/Main_Page" | grep -o "<title>.*</title>"`),
		func(out string) bool { return out == title })
	p.step("curl outside the mesh: Wikipedia through squid")
	// squid's log: time, elapsed, client, TCP_TUNNEL/200, bytes, CONNECT
	// en.wikipedia.org:443, HIER_DIRECT/<the site's address>, as the page shows it.
	tunnel := regexp.MustCompile(`(?m)^\d+\.\d{3} +\d+ (\d+\.\d+\.\d+\.\d+) TCP_TUNNEL/200 \d+ CONNECT en\.wikipedia\.org:443 - HIER_DIRECT/\d+\.\d+\.\d+\.\d+ -$`)
	squidLog := `kubectl exec "$(kubectl get pod -n external -l app=squid -o jsonpath={.items..metadata.name})" -n external -- tail /var/log/squid/access.log`
	if out := p.sh(squidLog); len(tunnel.FindAllString(out, -1)) != 1 {
		t.Errorf("squid's access.log:\n%s\nwant one line as the page's TCP_TUNNEL/200 ... CONNECT en.wikipedia.org:443 - HIER_DIRECT/...", out)
	}

	if out := p.sh(proxyVars + `kubectl apply -f - <<EOF
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: proxy
spec:
  hosts:
  - my-company-proxy.com # ignored
  addresses:
  - $PROXY_IP/32
  ports:
  - number: $PROXY_PORT
    name: tcp
    protocol: TCP
  location: MESH_EXTERNAL
  resolution: NONE
EOF`); out != "serviceentry.networking.istio.io/proxy created\n" {
		t.Errorf("apply the proxy's ServiceEntry printed %q", out)
	}
	// The sidecar's access log names the entry's cluster once the push reached it.
	p.until("the sidecar's curl through squid, logged by the sidecar to outbound|3128||my-company-proxy.com", func() string {
		return stdout(source + proxyVars + `kubectl exec "$SOURCE_POD" -c curl -- sh -c "HTTPS_PROXY=$PROXY_IP:$PROXY_PORT curl https://en.wikipedia.org/wiki/Main_Page" | grep -o "<title>.*</title>"
kubectl logs "$SOURCE_POD" -c istio-proxy`)()
	}, func(out string) bool {
		return strings.HasPrefix(out, title) && squidProxyLogLine.MatchString(out)
	})
	p.step("curl in the mesh: Wikipedia through squid, the sidecar's log names outbound|3128||my-company-proxy.com")
	out := p.sh(squidLog)
	if m := tunnel.FindAllStringSubmatch(out, -1); len(m) < 2 {
		t.Errorf("squid's access.log after the sidecar's curl:\n%s\nwant a second TCP_TUNNEL/200 line", out)
	}

	out = p.sh(`set -e
kubectl delete -f samples/curl/curl.yaml
kubectl delete -f samples/curl/curl.yaml -n external
kubectl delete -n external deployment squid
kubectl delete -n external configmap proxy-configmap
rm ./proxy.conf
kubectl delete namespace external
kubectl delete serviceentry proxy`)
	for _, want := range []string{
		`deployment.apps "curl" deleted`, `deployment.apps "squid" deleted`, `configmap "proxy-configmap" deleted`,
		`namespace "external" deleted`, `serviceentry.networking.istio.io "proxy" deleted`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the page's cleanup printed no %q:\n%s", want, out)
		}
	}
}
