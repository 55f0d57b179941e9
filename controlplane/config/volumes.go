package config

import (
	"cmp"
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
	}
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
