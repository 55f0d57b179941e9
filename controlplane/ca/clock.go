package ca

import "time"

// SetClockOffset shifts the CA's notion of now by d for the certificates it issues from
// now on (their NotBefore and NotAfter): -25h makes a 24 h certificate that is already
// expired, +1h one that is not yet valid. 0 resets it. For fault injection.
func (c *CA) SetClockOffset(d time.Duration) {
	c.mu.Lock()
	c.offset = d
	c.mu.Unlock()
}

// ClockOffset returns the offset SetClockOffset set.
func (c *CA) ClockOffset() time.Duration {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.offset
}
