// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// calicoctl as the oracle: Calico's own view of the test cluster's IPAM, to hold the
// provider's view against.
package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Calicoctl runs BinDir/calicoctl on the cluster's Kubernetes datastore and returns its output.
func (c *Cluster) Calicoctl(ctx context.Context, args ...string) (string, error) {
	bin := c.calicoPath("calicoctl")
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "DATASTORE_TYPE=kubernetes", "KUBECONFIG="+c.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("calicoctl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// CalicoctlPoolUsage is one IP Pool of `calicoctl ipam show --show-blocks`.
type CalicoctlPoolUsage struct {
	CIDR     string
	Capacity float64 // as calicoctl prints it (%.5g): exact up to 99,999 addresses
	InUse    int
	Blocks   map[string]int // block CIDR → addresses in use
}

var usageRow = regexp.MustCompile(`^\|\s*(IP Pool|Block)\s*\|\s*(\S+)\s*\|\s*(\S+)\s*\|\s*(\d+) \(`)

// CalicoctlUsage parses `calicoctl ipam show --show-blocks`, keyed by pool CIDR; blocks inside no
// pool (calicoctl prints them without a pool row) are under "".
func (c *Cluster) CalicoctlUsage(ctx context.Context) (map[string]CalicoctlPoolUsage, error) {
	out, err := c.Calicoctl(ctx, "ipam", "show", "--show-blocks")
	if err != nil {
		return nil, err
	}
	pools := map[string]CalicoctlPoolUsage{}
	var pool netip.Prefix // the pool row above
	for line := range strings.Lines(out) {
		m := usageRow.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		total, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, fmt.Errorf("calicoctl ipam show: %q: %w", line, err)
		}
		used, _ := strconv.Atoi(m[4])
		switch m[1] {
		case "IP Pool":
			if pool, err = netip.ParsePrefix(m[2]); err != nil {
				return nil, fmt.Errorf("calicoctl ipam show: %q: %w", line, err)
			}
			pools[m[2]] = CalicoctlPoolUsage{CIDR: m[2], Capacity: total, InUse: used, Blocks: map[string]int{}}
		case "Block":
			block, err := netip.ParsePrefix(m[2])
			if err != nil {
				return nil, fmt.Errorf("calicoctl ipam show: %q: %w", line, err)
			}
			key := pool.String()
			if !pool.IsValid() || !pool.Contains(block.Addr()) {
				key = ""
			}
			if _, ok := pools[key]; !ok {
				pools[key] = CalicoctlPoolUsage{Blocks: map[string]int{}}
			}
			pools[key].Blocks[m[2]] = used
		}
	}
	return pools, nil
}

// CalicoctlCheckReport is what `calicoctl ipam check` found.
type CalicoctlCheckReport struct {
	Problems      int
	Output        string
	Allocations   map[string][]CalicoctlAllocation `json:"allocations"`
	LeakedHandles []json.RawMessage                `json:"leakedHandles"`
}

// CalicoctlAllocation is one allocation of the report.
type CalicoctlAllocation struct {
	IP     string   `json:"ip"`
	Handle string   `json:"handle"`
	Pod    string   `json:"pod"`
	Node   string   `json:"node"`
	InUse  bool     `json:"inUse"`
	Owners []string `json:"owners"`
}

var checkTotal = regexp.MustCompile(`Check complete; found (\d+) problems\.`)

// CalicoctlCheck runs `calicoctl ipam check` with its JSON report.
func (c *Cluster) CalicoctlCheck(ctx context.Context) (CalicoctlCheckReport, error) {
	dir, err := os.MkdirTemp("", "calicoctl-check-")
	if err != nil {
		return CalicoctlCheckReport{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	path := filepath.Join(dir, "report.json")
	out, err := c.Calicoctl(ctx, "ipam", "check", "-o", path)
	r := CalicoctlCheckReport{Output: out}
	if err != nil {
		return r, err
	}
	m := checkTotal.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("calicoctl ipam check printed no total:\n%s", out)
	}
	r.Problems, _ = strconv.Atoi(m[1])
	data, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(data, &r)
}
