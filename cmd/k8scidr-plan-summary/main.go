// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Command k8scidr-plan-summary writes the Markdown summary of a k8scidr plan for a pull-request
// comment, from `terraform show -json tfplan` and, optionally, `terraform plan -json` output:
//
//	terraform plan -input=false -out=tfplan -json > plan.log
//	terraform show -json tfplan > plan.json
//	k8scidr-plan-summary -plan plan.json -log plan.log > summary.md
//
// When the plan failed there is no plan.json: give -log only, and the summary lists the errors.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/plansummary"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "k8scidr-plan-summary:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("k8scidr-plan-summary", flag.ContinueOnError)
	planPath := fs.String("plan", "", "`terraform show -json` output of the saved plan (- for stdin)")
	logPath := fs.String("log", "", "`terraform plan -json` output, for errors and warnings")
	o := plansummary.Options{}
	fs.StringVar(&o.Title, "title", "k8scidr plan", "first heading")
	fs.IntVar(&o.Entries, "entries", 50, "most entries shown per list")
	fs.IntVar(&o.Limit, "limit", plansummary.DefaultLimit, "most characters of the summary")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *planPath == "" && *logPath == "" {
		return fmt.Errorf("give -plan, -log or both")
	}
	if o.Limit < 1000 || o.Entries < 0 {
		return fmt.Errorf("-limit must be at least 1000 and -entries at least 0")
	}
	var plan *tfjson.Plan
	var diags []plansummary.Diagnostic
	err := readFile(*planPath, func(r io.Reader) (err error) {
		plan, err = plansummary.ReadPlan(r)
		return err
	})
	if err == nil {
		err = readFile(*logPath, func(r io.Reader) (err error) {
			diags, err = plansummary.ReadLog(r)
			return err
		})
	}
	if err != nil {
		return err
	}
	_, err = io.WriteString(out, plansummary.Summarize(plan, diags, o))
	return err
}

// readFile hands the file at path (stdin for -) to read; an empty path is not read.
func readFile(path string, read func(io.Reader) error) error {
	if path == "" {
		return nil
	}
	if path == "-" {
		return read(os.Stdin)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return read(f)
}
