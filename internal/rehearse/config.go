// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package rehearse

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// ConfigInfo is what the rehearsal needs to know about a configuration before it runs it.
type ConfigInfo struct {
	// Variables are the root module's variables.
	Variables []string
}

// CheckConfig reads the root module in dir and refuses what a rehearsal cannot keep off the
// real cluster: another provider (the override redirects only k8scidr; any other would act on
// whatever its configuration names), an aliased k8scidr provider (the override reaches only the
// default one), and module calls (their contents are not checked).
func CheckConfig(dir string) error {
	_, err := InspectConfig(dir)
	return err
}

// InspectConfig is CheckConfig, returning what it read.
func InspectConfig(dir string) (*ConfigInfo, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil {
		return nil, err
	}
	if json, _ := filepath.Glob(filepath.Join(dir, "*.tf.json")); len(json) > 0 {
		return nil, fmt.Errorf("%s: the rehearsal reads .tf files only; convert %s", dir, strings.Join(json, ", "))
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s holds no .tf file", dir)
	}
	info := &ConfigInfo{}
	var problems []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		file, diags := hclsyntax.ParseConfig(src, f, hcl.InitialPos)
		if diags.HasErrors() {
			return nil, diags
		}
		body, _ := file.Body.(*hclsyntax.Body)
		for _, b := range body.Blocks {
			at := fmt.Sprintf("%s:%d", filepath.Base(f), b.DefRange().Start.Line)
			label := func(i int) string {
				if i < len(b.Labels) {
					return b.Labels[i]
				}
				return ""
			}
			switch b.Type {
			case "variable":
				info.Variables = append(info.Variables, label(0))
			case "provider":
				if label(0) != "k8scidr" {
					problems = append(problems, fmt.Sprintf("%s: provider %q: the rehearsal redirects only k8scidr to the twin", at, label(0)))
				} else if _, ok := b.Body.Attributes["alias"]; ok {
					problems = append(problems, at+": an aliased k8scidr provider: the rehearsal redirects only the default one")
				}
			case "resource", "data", "ephemeral":
				if t := label(0); !strings.HasPrefix(t, "k8scidr_") && t != "terraform_data" {
					problems = append(problems, fmt.Sprintf("%s: %s %q belongs to another provider, which would act on the real cluster or cloud", at, b.Type, t))
				}
			case "module":
				problems = append(problems, fmt.Sprintf("%s: module %q: rehearse the module's own root configuration instead", at, label(0)))
			case "terraform":
				for _, rb := range b.Body.Blocks {
					if rb.Type != "required_providers" {
						continue
					}
					for name := range rb.Body.Attributes {
						if name != "k8scidr" {
							problems = append(problems, fmt.Sprintf("%s: required provider %q: the rehearsal redirects only k8scidr to the twin", at, name))
						}
					}
				}
			}
		}
	}
	if len(problems) > 0 {
		return nil, errors.New("this configuration cannot be rehearsed safely:\n  " + strings.Join(problems, "\n  "))
	}
	return info, nil
}
