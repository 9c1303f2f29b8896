module github.com/projectcalico/calico/lib/httpmachinery

go 1.24
