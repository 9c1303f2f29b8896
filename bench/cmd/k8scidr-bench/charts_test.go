// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWriteCharts draws scenarios 1 and 4 into well-formed SVG files the Markdown names, and
// keeps a 10,000-point line to about 1,000 points.
func TestWriteCharts(t *testing.T) {
	var tb table
	for _, sc := range []struct {
		scenario string
		n        int
	}{{"1. recreate 100 Services", 100}, {"4. recreate 10000 Services", 10000}} {
		for _, who := range []string{"k8scidr", "floor (client-go)"} {
			m := measure{}
			for i := range sc.n {
				m.windows = append(m.windows, time.Duration(i%300+5)*time.Millisecond)
				m.recovered = append(m.recovered, time.Duration(i)*10*time.Millisecond)
			}
			tb.add(sc.scenario, settingRaised, who, m)
		}
	}
	dir := t.TempDir()
	md, err := tb.writeCharts(filepath.Join(dir, "r.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"r-unavailability-raised.svg", "r-progress-raised.svg", "r-unavailability-scale-raised.svg", "r-progress-scale-raised.svg"} {
		if !strings.Contains(md, "("+f+")") {
			t.Errorf("the Markdown does not show %s:\n%s", f, md)
		}
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		d := xml.NewDecoder(strings.NewReader(string(data)))
		for {
			if _, err := d.Token(); err != nil {
				if err.Error() != "EOF" {
					t.Errorf("%s: not well-formed: %v", f, err)
				}
				break
			}
		}
		if strings.Contains(f, "scale") {
			if pts := strings.Count(string(data), ","); pts > 5000 { // 2 lines of ~1,000 steps (2 points each), not 40,000
				t.Errorf("%s: %d coordinate pairs, want the 10,000-point lines thinned", f, pts)
			}
		}
	}
	if strings.Contains(md, "defaults") {
		t.Errorf("charts for a setting that did not run:\n%s", md)
	}
}
