package runner

import (
	"encoding/xml"
	"fmt"
	"io"
)

// JUnit types: one suite per lab, one case per check (or per failed step's actions).
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []JUnitSuite `xml:"testsuite"`
}

// JUnitSuite is one lab in a JUnit report.
type JUnitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Time     float64     `xml:"time,attr"`
	Cases    []JUnitCase `xml:"testcase"`
}

// JUnitCase is one check in a JUnit report.
type JUnitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Failure   *JUnitFailure `xml:"failure,omitempty"`
}

// JUnitFailure says why a case failed.
type JUnitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the reports as JUnit XML.
func WriteJUnit(w io.Writer, reports ...Report) error {
	var out junitSuites
	for _, r := range reports {
		s := JUnitSuite{Name: r.Lab, Time: r.Duration.Seconds()}
		for i, st := range r.Steps {
			class := fmt.Sprintf("%s.step%d", r.Lab, i+1)
			if st.Error != "" {
				s.Cases = append(s.Cases, JUnitCase{Name: fmt.Sprintf("%d %s: actions", i+1, st.Name), ClassName: class,
					Failure: &JUnitFailure{Message: st.Error, Text: st.Error}})
				continue
			}
			for j, c := range st.Checks {
				jc := JUnitCase{Name: fmt.Sprintf("%d %s: %d %s", i+1, st.Name, j+1, c.Check), ClassName: class}
				if !c.Passed {
					msg := fmt.Sprintf("saw %s; want %s", c.Saw, c.Want)
					jc.Failure = &JUnitFailure{Message: msg, Text: msg + "\nhint: " + c.Hint}
				}
				s.Cases = append(s.Cases, jc)
			}
		}
		for _, c := range s.Cases {
			s.Tests++
			if c.Failure != nil {
				s.Failures++
			}
		}
		out.Suites = append(out.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// ReadJUnit parses a JUnit report written by WriteJUnit.
func ReadJUnit(r io.Reader) ([]JUnitSuite, error) {
	var in junitSuites
	if err := xml.NewDecoder(r).Decode(&in); err != nil {
		return nil, fmt.Errorf("read junit: %w", err)
	}
	return in.Suites, nil
}
