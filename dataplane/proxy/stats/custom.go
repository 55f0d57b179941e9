package stats

import "strings"

// CustomNamespace is the stat namespace istio-proxy registers for its standard metrics
// (Envoy's custom stat namespaces): stats under it keep their own names in
// /stats/prometheus, without the "envoy_" prefix and without the namespace, so
// "istiocustom.istio_requests_total" is exported as istio_requests_total.
const CustomNamespace = "istiocustom"

// TaggedCounter returns the counter whose tag-extracted name is name (e.g.
// "istiocustom.istio_requests_total") with tags, as Envoy's counterFromStatNames: the
// full name appends ".<tag>.<value>" for each tag, in order. It is created on first use.
func (s *Store) TaggedCounter(name string, tags []Tag) *Stat {
	return s.tagged(name, tags, KindCounter)
}

func (s *Store) tagged(name string, tags []Tag, kind Kind) *Stat {
	st := s.get(taggedName(name, tags), name, tags, kind, false)
	if !st.explicit.Load() {
		st.explicit.Store(true)
	}
	return st
}

// TaggedHistogram is TaggedCounter for a histogram.
func (s *Store) TaggedHistogram(name string, tags []Tag) *Histogram {
	h := s.histogram(taggedName(name, tags), name, tags, false)
	if !h.explicit.Load() {
		h.explicit.Store(true)
	}
	return h
}

// TaggedGauge is TaggedCounter for a gauge.
func (s *Store) TaggedGauge(name string, tags []Tag) *Stat {
	return s.tagged(name, tags, KindGauge)
}

func taggedName(name string, tags []Tag) string {
	n := len(name)
	for _, t := range tags {
		n += len(t.Name) + len(t.Value) + 2
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(name)
	for _, t := range tags {
		b.WriteByte('.')
		b.WriteString(t.Name)
		b.WriteByte('.')
		b.WriteString(t.Value)
	}
	return b.String()
}
