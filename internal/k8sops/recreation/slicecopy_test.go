// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/endpointslice"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// TestSliceCopyAdopted runs kube-controller-manager's own EndpointSlice reconciler
// (k8s.io/endpointslice) on a bridge served by sliceCopy's copy of the slice that reconciler
// wrote for the moved Service: it finds the copy up to date and writes nothing. A copy
// for a Service without a selector, or of a slice the controller did not write, is left to
// copyManager.
func TestSliceCopyAdopted(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelTopologyZone: "z1"}}}
	pods := []*corev1.Pod{pod("web-1", "10.0.0.1"), pod("web-2", "10.0.0.2")}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app", UID: "old-uid", Labels: map[string]string{"team": "a"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, ClusterIP: "100.64.0.20", ClusterIPs: []string{"100.64.0.20"},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports:      []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}
	bridge := svc.DeepCopy()
	bridge.Name, bridge.UID = "web-was-100-64-0-20", "bridge-uid"
	bridge.Labels = map[string]string{"k8scidr.io/old-ip-bridge": "true", "k8scidr.io/bridge-for": "web"}

	// The slice the controller writes for the Service before the move.
	client, reconcile := sliceReconciler(t, node)
	if err := reconcile(svc, pods, nil); err != nil {
		t.Fatal(err)
	}
	var written *discoveryv1.EndpointSlice
	for _, a := range client.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok {
			written, _ = c.GetObject().(*discoveryv1.EndpointSlice)
		}
	}
	if written == nil || len(written.Endpoints) != 2 {
		t.Fatalf("the reconciler wrote %v for the Service", written)
	}

	cp, adopted := sliceCopy(written, bridge, 0)
	if !adopted || cp.Labels[discoveryv1.LabelManagedBy] != sliceControllerName || cp.Labels["team"] != "" ||
		cp.Labels["k8scidr.io/bridge-for"] != "web" || !ptr.Deref(cp.OwnerReferences[0].Controller, false) {
		t.Fatalf("copy for the bridge: adopted %v, labels %v, owners %v", adopted, cp.Labels, cp.OwnerReferences)
	}
	client, reconcile = sliceReconciler(t, node)
	if err := reconcile(bridge, pods, []*discoveryv1.EndpointSlice{cp}); err != nil {
		t.Fatal(err)
	}
	if a := client.Actions(); len(a) != 0 {
		t.Errorf("the EndpointSlice reconciler rewrote the adopted copy: %v", a)
	}
	// A pod more: the controller updates the copy itself.
	client, reconcile = sliceReconciler(t, node, cp)
	if err := reconcile(bridge, append(slices.Clone(pods), pod("web-3", "10.0.0.3")), []*discoveryv1.EndpointSlice{cp}); err != nil {
		t.Fatal(err)
	}
	if a := client.Actions(); len(a) != 1 || a[0].GetVerb() != "update" {
		t.Errorf("with a third pod the reconciler did %v, want one update of the copy", a)
	}

	selectorless := bridge.DeepCopy()
	selectorless.Spec.Selector = nil
	if _, adopted := sliceCopy(written, selectorless, 0); adopted {
		t.Error("a copy for a Service without a selector is adopted: no controller would keep it in step")
	}
	handMade := written.DeepCopy()
	handMade.Labels[discoveryv1.LabelManagedBy] = "by-hand.example.com"
	if cp, adopted := sliceCopy(handMade, bridge, 0); adopted || cp.Labels[discoveryv1.LabelManagedBy] != copyManager {
		t.Errorf("a copy of a hand-made slice: adopted %v, managed by %s", adopted, cp.Labels[discoveryv1.LabelManagedBy])
	}
}

func pod(name, ip string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app", UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"},
			ResourceVersion: "1"},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Unix(0, 0))}}},
	}
}

// sliceReconciler is kube-controller-manager's EndpointSlice reconciler on a fake clientset
// that records its writes.
func sliceReconciler(t *testing.T, node *corev1.Node, objects ...runtime.Object) (*fake.Clientset, func(*corev1.Service, []*corev1.Pod, []*discoveryv1.EndpointSlice) error) {
	t.Helper()
	client := fake.NewClientset(objects...)
	nodes := informers.NewSharedInformerFactory(client, 0).Core().V1().Nodes()
	if err := nodes.Informer().GetStore().Add(node); err != nil {
		t.Fatal(err)
	}
	r := endpointslice.NewReconciler(client, nodes.Lister(), 100, endpointsliceutil.NewEndpointSliceTracker(), nil,
		record.NewFakeRecorder(10), sliceControllerName)
	return client, func(svc *corev1.Service, pods []*corev1.Pod, existing []*discoveryv1.EndpointSlice) error {
		// The slices the controller hands its reconciler: those labelled with the Service's name
		// and its own manager (kube-controller-manager's endpointslice_controller.go, syncService).
		mine := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: sliceControllerName})
		existing = slices.DeleteFunc(slices.Clone(existing), func(s *discoveryv1.EndpointSlice) bool { return !mine.Matches(labels.Set(s.Labels)) })
		return r.Reconcile(klog.Background(), svc, pods, existing, time.Now())
	}
}
