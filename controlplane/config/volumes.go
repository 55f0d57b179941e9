package config

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"

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
// waiting; here the persona starts without those files). An emptyDir volume holds no
// files at the start, but the containers that mount it share it: its mounts are kept
// (model.EmptyDir) and the lab gives each of them the same directory, as the
// secure-metrics sample's Prometheus reads the certificates its sidecar writes there
// (OUTPUT_CERTS). Other volume kinds hold no files.

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
		spec := &o.kube.template.Spec
		appMounts := spec.Containers[mainContainer(spec)].VolumeMounts
		p.App.Files = volumeFiles(objs, p.Namespace, spec.Volumes, appMounts)
		p.App.EmptyDirs = emptyDirMounts(spec.Volumes, appMounts)
		if p.Sidecar.Inject {
			if vols, mounts, err := sidecarUserVolumes(o.kube.template.Annotations, spec.Volumes); err == nil { // checked with the workload
				all := append(slices.Clip(spec.Volumes), vols...)
				p.Sidecar.Files = volumeFiles(objs, p.Namespace, all, mounts)
				p.Sidecar.EmptyDirs = emptyDirMounts(all, mounts)
			}
		}
	}
}

// Istio's injector annotations that give the istio-proxy container volumes of the pod.
// Each is JSON the injection template ranges over (fromJSON): an object of a volume's
// name to its Volume and VolumeMount (the sidecar TLS termination task's), or an array
// of them (prometheus-secure-metrics.yaml's mount of the pod's own istio-certs volume).
// The template writes `name: "<key or index>"` and then the value's own fields, so a
// value's name, when it has one, wins over its key or index, as the decoder of the
// injected YAML keeps a repeated key's last value.
const (
	userVolumeAnnotation      = "sidecar.istio.io/userVolume"
	userVolumeMountAnnotation = "sidecar.istio.io/userVolumeMount"
)

// sidecarUserVolumes reads a pod template's userVolume and userVolumeMount annotations as
// Istio's injector does, in the annotations' order (an object's in key order). A mount
// must name a volume of userVolume or of the pod (podVolumes), as Kubernetes requires of
// a pod.
func sidecarUserVolumes(annotations map[string]string, podVolumes []corev1.Volume) ([]corev1.Volume, []corev1.VolumeMount, error) {
	var outV []corev1.Volume
	if v, ok := annotations[userVolumeAnnotation]; ok {
		err := forEachInjected(v, func(key string, raw json.RawMessage) error {
			var vol corev1.Volume
			if err := json.Unmarshal(raw, &vol); err != nil {
				return fmt.Errorf("%s[%s]: %w", userVolumeAnnotation, key, err)
			}
			vol.Name = cmp.Or(vol.Name, key)
			outV = append(outV, vol)
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("%s: a JSON object of volume name to volume, or an array of volumes: %w", userVolumeAnnotation, err)
		}
	}
	var outM []corev1.VolumeMount
	if v, ok := annotations[userVolumeMountAnnotation]; ok {
		err := forEachInjected(v, func(key string, raw json.RawMessage) error {
			var m corev1.VolumeMount
			if err := json.Unmarshal(raw, &m); err != nil {
				return fmt.Errorf("%s[%s]: %w", userVolumeMountAnnotation, key, err)
			}
			m.Name = cmp.Or(m.Name, key)
			outM = append(outM, m)
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("%s: a JSON object of volume name to volume mount, or an array of volume mounts: %w", userVolumeMountAnnotation, err)
		}
	}
	has := func(vols []corev1.Volume, n string) bool {
		return slices.ContainsFunc(vols, func(v corev1.Volume) bool { return v.Name == n })
	}
	for _, m := range outM {
		if !has(outV, m.Name) && !has(podVolumes, m.Name) {
			return nil, nil, fmt.Errorf("%s[%s]: no volume %q in %s or the pod's spec.volumes", userVolumeMountAnnotation, m.Name, m.Name, userVolumeAnnotation)
		}
		if !path.IsAbs(m.MountPath) {
			return nil, nil, fmt.Errorf("%s[%s].mountPath: %q is not an absolute path", userVolumeMountAnnotation, m.Name, m.MountPath)
		}
	}
	return outV, outM, nil
}

// forEachInjected calls f with each element of an injector annotation's JSON: an
// object's values with their keys, in key order, or an array's elements with their
// indexes.
func forEachInjected(v string, f func(key string, raw json.RawMessage) error) error {
	var arr []json.RawMessage
	if err := json.Unmarshal([]byte(v), &arr); err == nil {
		for i, raw := range arr {
			if err := f(strconv.Itoa(i), raw); err != nil {
				return err
			}
		}
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(v), &obj); err != nil {
		return err
	}
	for _, k := range sortedKeysOf(obj) {
		if err := f(k, obj[k]); err != nil {
			return err
		}
	}
	return nil
}

// emptyDirMounts returns the mounts of emptyDir volumes among mounts: the directories a
// pod's containers share.
func emptyDirMounts(volumes []corev1.Volume, mounts []corev1.VolumeMount) []model.EmptyDir {
	var out []model.EmptyDir
	for _, m := range mounts {
		i := slices.IndexFunc(volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 || volumes[i].EmptyDir == nil || !path.IsAbs(m.MountPath) || m.SubPath != "" {
			continue
		}
		out = append(out, model.EmptyDir{Volume: m.Name, Path: path.Clean(m.MountPath)})
	}
	return out
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
