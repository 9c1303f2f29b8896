// What every stage reads of a Service the same way: its key and its ClusterIPs.
package k8sops

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

func SvcKey(svc *corev1.Service) string { return svc.Namespace + "/" + svc.Name }

// ClusterIPs parses a Service's ClusterIPs; none for headless and ExternalName Services.
func ClusterIPs(svc *corev1.Service) []netip.Addr {
	raw := svc.Spec.ClusterIPs
	if len(raw) == 0 && svc.Spec.ClusterIP != "" {
		raw = []string{svc.Spec.ClusterIP}
	}
	var out []netip.Addr
	for _, s := range raw {
		if ip, err := netip.ParseAddr(s); err == nil {
			out = append(out, ip)
		}
	}
	return out
}
