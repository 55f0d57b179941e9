package stats

import (
	"strconv"
	"sync/atomic"
)

// CodeCounters are the per response code counters of one scope, Envoy's
// <prefix><code> and <prefix><N>xx (upstream_rq_200, upstream_rq_2xx). Each counter is
// created on first use, as a lookup by name would create it, and then cached, so counting
// a response does no string building, map lookup or lock. Safe for concurrent use.
type CodeCounters struct {
	scope   Scope
	prefix  string
	codes   [6]atomic.Pointer[codeTable] // by class: codes N00..N99 (index 0 unused)
	classes [6]atomic.Pointer[Stat]      // 1xx..5xx (index 0 unused)
}

// codeTable caches the counters of one class's codes.
type codeTable [100]atomic.Pointer[Stat]

// NewCodeCounters returns the code counters named prefix+code in sc, e.g. prefix
// "upstream_rq_".
func NewCodeCounters(sc Scope, prefix string) *CodeCounters {
	return &CodeCounters{scope: sc, prefix: prefix}
}

// Code returns the counter <prefix><code>.
func (c *CodeCounters) Code(code int) *Stat {
	if code < 100 || code > 599 {
		return c.scope.Counter(c.prefix + strconv.Itoa(code))
	}
	t := c.codes[code/100].Load()
	if t == nil {
		c.codes[code/100].CompareAndSwap(nil, new(codeTable))
		t = c.codes[code/100].Load()
	}
	p := &t[code%100]
	if s := p.Load(); s != nil {
		return s
	}
	s := c.scope.Counter(c.prefix + strconv.Itoa(code))
	p.Store(s)
	return s
}

// Class returns the counter <prefix><N>xx of code's class.
func (c *CodeCounters) Class(code int) *Stat {
	if code < 100 || code > 599 {
		return c.scope.Counter(c.prefix + CodeClass(code))
	}
	p := &c.classes[code/100]
	if s := p.Load(); s != nil {
		return s
	}
	s := c.scope.Counter(c.prefix + CodeClass(code))
	p.Store(s)
	return s
}
