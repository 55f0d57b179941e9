package demoapp

import (
	"cmp"
	"context"
	"crypto/sha1" //nolint:gosec // a dashboard's uid is a name, not a secret
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// The grafana persona stands in for the grafana/grafana image of Istio's
// samples/addons/grafana.yaml, as far as a learner of the Istio dashboard page touches it
// without a browser: Grafana's HTTP API over the files Grafana provisions from the
// sample's ConfigMaps. It reads the pod's volumes below VolumeRoot:
// /etc/grafana/provisioning/datasources/*.yaml (the datasources) and
// /etc/grafana/provisioning/dashboards/*.yaml (file providers, whose options.path holds
// the dashboards' JSON), and serves on 3000 (grafana.ini's default http_port)
// /api/health, /api/search, /api/dashboards/uid/<uid>, /api/datasources and
// /api/datasources/proxy/<id or uid/UID>/<path>, which forwards to the datasource's url
// as Grafana's data source proxy does (the panels' PromQL answered by the lab's
// Prometheus). It has no UI, no users or database, and no /api/ds/query: docs/ARCHITECTURE.md,
// "Grafana".

// PersonaGrafana is Grafana's HTTP API on its provisioned datasources and dashboards.
const PersonaGrafana = "grafana"

// grafanaPort is Grafana's default http_port, which the sample's grafana.ini keeps.
const grafanaPort = 3000

// grafanaProvisioning is Grafana's default provisioning directory (paths.provisioning of
// the sample's grafana.ini).
const grafanaProvisioning = "/etc/grafana/provisioning"

// grafanaVersion is the sample image's version, which /api/health reports.
const grafanaVersion = "12.0.1"

// grafanaDatasource is one provisioned datasource as Grafana's API shows it.
type grafanaDatasource struct {
	ID        int            `json:"id"`
	UID       string         `json:"uid"`
	OrgID     int            `json:"orgId"`
	Name      string         `json:"name"`
	Type      string         `json:"type"`
	Access    string         `json:"access"`
	URL       string         `json:"url"`
	IsDefault bool           `json:"isDefault"`
	JSONData  map[string]any `json:"jsonData,omitempty"`
	ReadOnly  bool           `json:"readOnly"`
}

// grafanaDashboard is one provisioned dashboard.
type grafanaDashboard struct {
	ID     int
	UID    string
	Title  string
	Tags   []string
	Folder string
	File   string         // its path in the container
	JSON   map[string]any // the dashboard, with id and uid set
}

// grafanaState is what the persona provisioned.
type grafanaState struct {
	datasources []grafanaDatasource
	dashboards  []grafanaDashboard
}

// readGrafanaProvisioning reads the datasources and dashboards below volumeRoot as
// Grafana's provisioning reads them. A file that does not parse is an error naming it.
func readGrafanaProvisioning(volumeRoot string) (*grafanaState, error) {
	st := &grafanaState{}
	read := func(kind string) ([]string, error) {
		files, err := filepath.Glob(filepath.Join(volumeRoot, grafanaProvisioning, kind, "*.yaml"))
		if err != nil {
			return nil, err
		}
		yml, _ := filepath.Glob(filepath.Join(volumeRoot, grafanaProvisioning, kind, "*.yml"))
		return append(files, yml...), nil
	}
	dsFiles, err := read("datasources")
	if err != nil {
		return nil, err
	}
	for _, f := range dsFiles {
		var doc struct {
			Datasources []grafanaDatasource `json:"datasources"`
		}
		if err := readYAMLFile(f, &doc); err != nil {
			return nil, err
		}
		for _, ds := range doc.Datasources {
			ds.ID = len(st.datasources) + 1
			ds.OrgID = cmp.Or(ds.OrgID, 1)
			// Grafana gives a datasource provisioned without a uid a random one; the
			// persona's is its name, lower-cased, stable across restarts.
			ds.UID = cmp.Or(ds.UID, strings.ToLower(ds.Name))
			ds.ReadOnly = true
			st.datasources = append(st.datasources, ds)
		}
	}
	provFiles, err := read("dashboards")
	if err != nil {
		return nil, err
	}
	for _, f := range provFiles {
		var doc struct {
			Providers []struct {
				Name    string `json:"name"`
				Folder  string `json:"folder"`
				Type    string `json:"type"`
				Options struct {
					Path string `json:"path"`
				} `json:"options"`
			} `json:"providers"`
		}
		if err := readYAMLFile(f, &doc); err != nil {
			return nil, err
		}
		for _, p := range doc.Providers {
			if p.Type != "" && p.Type != "file" {
				return nil, fmt.Errorf("%s: provider %s: type %q: only file providers are read", f, p.Name, p.Type)
			}
			files, _ := filepath.Glob(filepath.Join(volumeRoot, filepath.Clean("/"+p.Options.Path), "*.json"))
			slices.Sort(files)
			for _, jf := range files {
				raw, err := os.ReadFile(jf)
				if err != nil {
					return nil, err
				}
				var d map[string]any
				if err := json.Unmarshal(raw, &d); err != nil {
					return nil, fmt.Errorf("dashboard %s: %w", strings.TrimPrefix(jf, volumeRoot), err)
				}
				title, _ := d["title"].(string)
				uid, _ := d["uid"].(string)
				if uid == "" {
					// Grafana gives a provisioned dashboard without a uid a random one;
					// the persona's is derived from its provider and file, stable.
					sum := sha1.Sum([]byte(p.Name + "/" + filepath.Base(jf))) //nolint:gosec // a name
					uid = hex.EncodeToString(sum[:])[:14]
				}
				var tags []string
				if ts, ok := d["tags"].([]any); ok {
					for _, t := range ts {
						if s, ok := t.(string); ok {
							tags = append(tags, s)
						}
					}
				}
				id := len(st.dashboards) + 1
				d["id"], d["uid"] = id, uid
				st.dashboards = append(st.dashboards, grafanaDashboard{ID: id, UID: uid, Title: title, Tags: tags, Folder: p.Folder,
					File: strings.TrimPrefix(jf, filepath.Clean(volumeRoot)), JSON: d})
			}
		}
	}
	return st, nil
}

func readYAMLFile(f string, into any) error {
	raw, err := os.ReadFile(f)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("%s: %w", f, err)
	}
	return nil
}

// serveGrafana serves Grafana's API on grafanaPort until ctx ends.
func serveGrafana(ctx context.Context, addr string, volumeRoot string, log *slog.Logger) error {
	st, err := readGrafanaProvisioning(volumeRoot)
	if err != nil {
		return fmt.Errorf("grafana: %w", err)
	}
	log.Info("grafana provisioned", "datasources", len(st.datasources), "dashboards", len(st.dashboards))
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(grafanaPort)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: st.handler(log), ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// grafanaSlug is Grafana's slug of a title: lower case, runs of other characters one
// dash.
func grafanaSlug(title string) string {
	return strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(title), "-"), "-")
}

func (st *grafanaState) handler(log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	notFound := func(w http.ResponseWriter, msg string) {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": msg})
	}
	mux.HandleFunc("GET /api/health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"commit": "meshlab", "database": "ok", "version": grafanaVersion})
	})
	mux.HandleFunc("GET /api/datasources", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, st.datasources)
	})
	mux.HandleFunc("GET /api/search", func(w http.ResponseWriter, r *http.Request) {
		q := strings.ToLower(r.URL.Query().Get("query"))
		out := []map[string]any{}
		ds := slices.Clone(st.dashboards)
		slices.SortStableFunc(ds, func(a, b grafanaDashboard) int {
			return cmp.Compare(strings.ToLower(a.Title), strings.ToLower(b.Title))
		})
		for _, d := range ds {
			if q != "" && !strings.Contains(strings.ToLower(d.Title), q) {
				continue
			}
			slug := grafanaSlug(d.Title)
			tags := d.Tags
			if tags == nil {
				tags = []string{}
			}
			out = append(out, map[string]any{
				"id": d.ID, "uid": d.UID, "title": d.Title, "uri": "db/" + slug, "url": "/d/" + d.UID + "/" + slug,
				"slug": "", "type": "dash-db", "tags": tags, "isStarred": false,
				"folderTitle": d.Folder, "sortMeta": 0,
			})
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET /api/dashboards/uid/{uid}", func(w http.ResponseWriter, r *http.Request) {
		for _, d := range st.dashboards {
			if d.UID == r.PathValue("uid") {
				slug := grafanaSlug(d.Title)
				writeJSON(w, http.StatusOK, map[string]any{
					"meta": map[string]any{
						"type": "db", "slug": slug, "url": "/d/" + d.UID + "/" + slug, "folderTitle": d.Folder,
						"provisioned": true, "provisionedExternalId": path.Base(d.File), "canSave": false, "canEdit": true,
					},
					"dashboard": d.JSON,
				})
				return
			}
		}
		notFound(w, "Dashboard not found")
	})
	proxy := func(w http.ResponseWriter, r *http.Request, ds *grafanaDatasource, rest string) {
		if ds.Access != "" && ds.Access != "proxy" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"message": "Data source is not configured for proxy access"})
			return
		}
		target, err := url.Parse(ds.URL)
		if err != nil || target.Host == "" {
			writeJSON(w, http.StatusBadGateway, map[string]string{"message": "Data source has no valid url"})
			return
		}
		rp := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.Out.URL.Path = strings.TrimSuffix(target.Path, "/") + "/" + strings.TrimPrefix(rest, "/")
				pr.Out.URL.RawPath = ""
				pr.Out.Host = target.Host
			},
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		rp.ServeHTTP(w, r)
	}
	mux.HandleFunc("/api/datasources/proxy/uid/{uid}/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		for i := range st.datasources {
			if st.datasources[i].UID == r.PathValue("uid") {
				proxy(w, r, &st.datasources[i], r.PathValue("rest"))
				return
			}
		}
		notFound(w, "Data source not found")
	})
	mux.HandleFunc("/api/datasources/proxy/{id}/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.Atoi(r.PathValue("id"))
		for i := range st.datasources {
			if st.datasources[i].ID == id {
				proxy(w, r, &st.datasources[i], r.PathValue("rest"))
				return
			}
		}
		notFound(w, "Data source not found")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		notFound(w, "Not found")
	})
	return mux
}
