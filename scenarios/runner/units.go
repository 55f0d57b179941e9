package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Percent is a share in percent, 0 to 100, written "10%" or as a number of percent.
type Percent float64

// ParsePercent reads "10%", "2.5%" or "10"; anything else (a second "%", a sign, more
// than 100) is an error.
func ParsePercent(s string) (Percent, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(t, "%")
	if t == "" || strings.ContainsAny(t, "%+-eEinfINFxX_") {
		return 0, fmt.Errorf("%q is not a percentage (want e.g. \"10%%\")", s)
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a percentage (want e.g. \"10%%\")", s)
	}
	if f < 0 || f > 100 {
		return 0, fmt.Errorf("%q is not between 0%% and 100%%", s)
	}
	return Percent(f), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (p *Percent) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var f float64
		if err := json.Unmarshal(b, &f); err != nil {
			return errors.New("want a percentage such as \"10%\"")
		}
		s = strconv.FormatFloat(f, 'f', -1, 64)
	}
	v, err := ParsePercent(s)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// String renders p as "12.5%".
func (p Percent) String() string { return strconv.FormatFloat(float64(p), 'f', -1, 64) + "%" }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("want a duration such as \"500ms\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("%q is not a duration (want e.g. \"500ms\")", s)
	}
	*d = Duration(v)
	return nil
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
