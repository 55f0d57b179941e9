package config

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Volumes: there is no container runtime, but an image's persona may read the files a
// container mounts, as the nginx of Istio's egress TLS origination task reads its
// nginx.conf (a ConfigMap) and its certificates (Secrets). mountVolumes gives each pod
// made by a Kubernetes workload the files of the secret and configMap volumes its
// first container mounts, resolved in the pod's namespace as kubelet does: every key
// (or the volume's items) as <mountPath>/<key>, or one key at mountPath with subPath.
// A volume whose object does not exist is left out (kubelet would keep the pod
// waiting; here the persona starts without those files); other volume kinds hold no
// files.

// mountVolumes sets the App.Files of the pods made by the objects' Kubernetes
// workloads.
func mountVolumes(objs []*Object, pods []*model.Pod) {
	byName := map[string]*Object{}
	for _, o := range objs {
		if o.kube != nil {
			for _, p := range o.pods {
				byName[p.Namespace+"/"+p.Name] = o
			}
		}
	}
	for _, p := range pods {
		o := byName[p.Namespace+"/"+p.Name]
		if o == nil || len(o.kube.template.Spec.Containers) == 0 {
			continue
		}
		p.App.Files = volumeFiles(objs, p.Namespace, o.kube.template.Spec.Volumes, o.kube.template.Spec.Containers[mainContainer(&o.kube.template.Spec)].VolumeMounts)
		if p.Sidecar.Inject {
			if vols, mounts, err := sidecarUserVolumes(o.kube.template.Annotations); err == nil { // checked with the workload
				p.Sidecar.Files = volumeFiles(objs, p.Namespace, vols, mounts)
			}
		}
	}
}

// Istio's injector annotations that give the istio-proxy container volumes of the pod:
// JSON maps of a volume's name to its Volume (without the name) and to its VolumeMount,
// as the sidecar TLS termination task mounts its certificate Secrets.
const (
	userVolumeAnnotation      = "sidecar.istio.io/userVolume"
	userVolumeMountAnnotation = "sidecar.istio.io/userVolumeMount"
)

// sidecarUserVolumes reads a pod template's userVolume and userVolumeMount annotations as
// Istio's injector does (each key the volume's name), in name order. A mount must name a
// volume of userVolume, as Kubernetes requires of a pod.
func sidecarUserVolumes(annotations map[string]string) ([]corev1.Volume, []corev1.VolumeMount, error) {
	var vols map[string]corev1.Volume
	var mounts map[string]corev1.VolumeMount
	if v, ok := annotations[userVolumeAnnotation]; ok {
		if err := json.Unmarshal([]byte(v), &vols); err != nil {
			return nil, nil, fmt.Errorf("%s: a JSON object of volume name to volume: %w", userVolumeAnnotation, err)
		}
	}
	if v, ok := annotations[userVolumeMountAnnotation]; ok {
		if err := json.Unmarshal([]byte(v), &mounts); err != nil {
			return nil, nil, fmt.Errorf("%s: a JSON object of volume name to volume mount: %w", userVolumeMountAnnotation, err)
		}
	}
	var outV []corev1.Volume
	for _, n := range sortedKeysOf(vols) {
		v := vols[n]
		v.Name = n
		outV = append(outV, v)
	}
	var outM []corev1.VolumeMount
	for _, n := range sortedKeysOf(mounts) {
		if _, ok := vols[n]; !ok {
			return nil, nil, fmt.Errorf("%s[%s]: no volume %q in %s", userVolumeMountAnnotation, n, n, userVolumeAnnotation)
		}
		m := mounts[n]
		m.Name = n
		if !path.IsAbs(m.MountPath) {
			return nil, nil, fmt.Errorf("%s[%s].mountPath: %q is not an absolute path", userVolumeMountAnnotation, n, m.MountPath)
		}
		outM = append(outM, m)
	}
	return outV, outM, nil
}

// volumeFiles returns the files the mounts of volumes show, in path order.
func volumeFiles(objs []*Object, ns string, volumes []corev1.Volume, mounts []corev1.VolumeMount) []model.File {
	var out []model.File
	for _, m := range mounts {
		i := slices.IndexFunc(volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 || !path.IsAbs(m.MountPath) {
			continue
		}
		data, items := volumeData(objs, ns, volumes[i])
		if data == nil {
			continue
		}
		paths := map[string]string{} // key -> path below the mount
		if len(items) > 0 {
			for _, it := range items {
				paths[it.Key] = it.Path
			}
		} else {
			for k := range data {
				paths[k] = k
			}
		}
		for k, rel := range paths {
			d, ok := data[k]
			if !ok || rel == "" || path.IsAbs(rel) || path.Clean(rel) != rel || rel == ".." || len(rel) > 2 && rel[:3] == "../" {
				continue
			}
			switch m.SubPath {
			case "":
				out = append(out, model.File{Path: path.Join(m.MountPath, rel), Data: d})
			case rel:
				out = append(out, model.File{Path: path.Clean(m.MountPath), Data: d})
			}
		}
	}
	slices.SortFunc(out, func(a, b model.File) int { return cmp.Compare(a.Path, b.Path) })
	return slices.CompactFunc(out, func(a, b model.File) bool { return a.Path == b.Path })
}

// volumeData returns the data of the Secret or ConfigMap a volume names in namespace
// ns (nil when it names neither or the object is missing) and the volume's items.
func volumeData(objs []*Object, ns string, v corev1.Volume) (map[string][]byte, []corev1.KeyToPath) {
	switch {
	case v.Secret != nil:
		for _, o := range objs {
			if o.Secret != nil && o.Origin.Namespace == ns && o.Origin.Name == v.Secret.SecretName {
				data := map[string][]byte{}
				for k, d := range o.Secret.Data {
					data[k] = d
				}
				for k, s := range o.Secret.StringData {
					data[k] = []byte(s)
				}
				return data, v.Secret.Items
			}
		}
	case v.ConfigMap != nil:
		for _, o := range objs {
			if o.ConfigMap != nil && o.Origin.Namespace == ns && o.Origin.Name == v.ConfigMap.Name {
				data := map[string][]byte{}
				for k, s := range o.ConfigMap.Data {
					data[k] = []byte(s)
				}
				for k, d := range o.ConfigMap.BinaryData {
					data[k] = d
				}
				return data, v.ConfigMap.Items
			}
		}
	}
	return nil, nil
}
