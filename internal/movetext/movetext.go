// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Package movetext is how a planned Service move reads in a Terraform plan: one string per
// Service, "100.64.0.10 to 172.24.0.10 (ClusterIP, uid 0f8e7a52-…)". One string instead of an
// object of four attributes and two lists makes a 10,000-move plan value seven times smaller,
// and terraform-plugin-framework walks that value once per top-level attribute while planning.
// The provider writes and reads it; the PR summary reads it from plan JSON.
package movetext

import (
	"fmt"
	"regexp"
	"strings"
)

// Move is one planned move: a Service's type and UID when planned, and its spec.clusterIPs
// before and after, in family order.
type Move struct {
	OldIPs, NewIPs []string
	Type, UID      string
}

// Format is what the plan shows for a move.
const Format = "OLD_IPS to NEW_IPS (TYPE, uid UID)"

// String is the move as the plan shows it.
func (m Move) String() string {
	return fmt.Sprintf("%s (%s, uid %s)", Pair(m.OldIPs, m.NewIPs), m.Type, m.UID)
}

// Pair is "old to new", each side's IPs comma-separated in family order: what
// k8scidr_service_recreation's recreated shows per Service.
func Pair(oldIPs, newIPs []string) string {
	return strings.Join(oldIPs, ",") + " to " + strings.Join(newIPs, ",")
}

var moveRegexp = regexp.MustCompile(`^(\S+) to (\S+) \(([A-Za-z]+), uid (\S+)\)$`)

// Parse reads a move as String writes it.
func Parse(s string) (Move, error) {
	m := moveRegexp.FindStringSubmatch(s)
	if m == nil {
		return Move{}, fmt.Errorf("%q is not a move: want %q, as the k8scidr_service_moves data source writes it", s, Format)
	}
	return Move{OldIPs: strings.Split(m[1], ","), NewIPs: strings.Split(m[2], ","), Type: m[3], UID: m[4]}, nil
}
