// A stand-in for terraform's pg state backend, a module of its own in terraform's repository
// that the Go module proxy does not serve at terraform's release (see ../../go.mod).
module github.com/hashicorp/terraform/internal/backend/remote-state/pg

go 1.24.5
