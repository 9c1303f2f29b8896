# Imported by the range kube-apiserver serves (two ranges comma-separated, one per family);
# the next apply moves default/kubernetes there if it is not yet.
terraform import k8scidr_apiserver_service.this 172.24.0.0/15
