package lab

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/demoapp"
)

// The Kiali addon's persona (demoapp/kiali.go) has no Kubernetes client: the lab writes
// it the Services its validations check, with whether their pods have a sidecar, below
// the pod's volume root at demoapp.KialiServicesFile, when the pod starts and after
// config or pods change (watchPromEvents' settled write). docs/ARCHITECTURE.md, "Kiali".

// kialiServices is the lab's Services as the kiali persona reads them.
func kialiServices(m *model.Model) []demoapp.KialiService {
	out := make([]demoapp.KialiService, 0, len(m.Services))
	for _, s := range m.Services {
		if s.Host != "" {
			continue // a waypoint's ServiceEntry host, not a Service
		}
		ks := demoapp.KialiService{Namespace: s.Namespace, Name: s.Name, Labels: s.Labels}
		for _, p := range s.Ports {
			ks.Ports = append(ks.Ports, demoapp.KialiServicePort{Name: p.Name, Port: int(p.Port), AppProtocol: p.AppProtocol})
		}
		for _, p := range m.Pods {
			if p.Namespace == s.Namespace && p.Sidecar.Inject && s.Selects(p.Labels) {
				ks.Sidecar = true
				break
			}
		}
		out = append(out, ks)
	}
	return out
}

// writeKialiServices writes the Services file of every kiali pod of the lab.
func writeKialiServices(l *Lab) {
	m := l.below().Model()
	var data []byte
	for _, p := range m.Pods {
		if p.App.Persona != demoapp.PersonaKiali {
			continue
		}
		if data == nil {
			var err error
			if data, err = json.Marshal(kialiServices(m)); err != nil {
				l.log.Warn("kiali: services", "err", err)
				return
			}
		}
		if err := writeKialiFile(podVolumeRoot(l.paths.PodDir(p.Key())), data); err != nil {
			l.log.Warn("kiali: write services file", "pod", p.Key(), "err", err)
		}
	}
}

// writeKialiFile writes data at demoapp.KialiServicesFile below root, readable by the
// app's uid (the directories it makes 0755, the file 0644), replacing it at once.
func writeKialiFile(root string, data []byte) error {
	f := filepath.Join(root, demoapp.KialiServicesFile)
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		return err
	}
	tmp := f + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, f)
}
