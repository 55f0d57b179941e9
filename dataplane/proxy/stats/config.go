package stats

import (
	"regexp"
	"sort"
	"strings"
)

// TagRule is one of the bootstrap's stats_config.stats_tags: a regex tag extractor
// (Envoy's TagExtractorImpl: the first capture group is removed from the tag-extracted
// name, the second, or else the first, is the tag's value) or a fixed tag added to every
// stat.
type TagRule struct {
	Name  string
	Regex *regexp.Regexp // nil for a fixed_value tag
	Fixed string
}

// Config is the bootstrap's stats_config as the store applies it. Immutable.
type Config struct {
	// Rules are stats_tags, in order.
	Rules []TagRule
	// UseDefaultTags is use_all_default_tags (default true): Envoy's default tag
	// extractors (envoy.cluster_name and the rest, see names.go) apply too.
	UseDefaultTags bool
	// Include is stats_matcher: whether a stat of this full name exists (Envoy does not
	// instantiate the others, so no admin endpoint shows them); nil includes all.
	Include func(name string) bool
}

// SetConfig applies the bootstrap's stats_config; nil restores Envoy's defaults. It is
// called once at startup, before any stat is rendered.
func (s *Store) SetConfig(c *Config) {
	s.mu.Lock()
	s.cfg = c
	s.mu.Unlock()
}

func (s *Store) config() *Config {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cfg
}

// view returns the tag-extracted name and the tags a stat is rendered with. Stats
// created with explicit tags (istio.stats' metrics) keep them, as Envoy does not run
// the extractors on a stat that brings its own tags.
func (c *Config) view(name, extracted string, tags []Tag, explicit bool) (string, []Tag) {
	if c == nil || explicit {
		return extracted, tags
	}
	base, out := name, []Tag(nil)
	if c.UseDefaultTags {
		base, out = extracted, append(out, tags...)
	}
	type span struct{ from, to int }
	var remove []span
	for _, r := range c.Rules {
		if r.Regex == nil {
			continue
		}
		m := r.Regex.FindStringSubmatchIndex(base)
		if len(m) < 4 || m[2] < 0 {
			continue
		}
		value := base[m[2]:m[3]]
		if len(m) >= 6 && m[4] >= 0 {
			value = base[m[4]:m[5]]
		}
		out = append(out, Tag{Name: r.Name, Value: value})
		remove = append(remove, span{m[2], m[3]})
	}
	for _, r := range c.Rules {
		if r.Regex == nil {
			out = append(out, Tag{Name: r.Name, Value: r.Fixed})
		}
	}
	if len(remove) == 0 {
		return base, out
	}
	sort.Slice(remove, func(i, j int) bool { return remove[i].from < remove[j].from })
	var b strings.Builder
	pos := 0
	for _, sp := range remove {
		if sp.from > pos {
			b.WriteString(base[pos:sp.from])
		}
		pos = max(pos, sp.to)
	}
	b.WriteString(base[pos:])
	return b.String(), out
}

func (c *Config) includes(name string) bool {
	return c == nil || c.Include == nil || c.Include(name)
}
