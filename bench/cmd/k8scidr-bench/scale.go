// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"context"
	"fmt"
	"regexp"
)

// scale is scenarios 4 and 5, at the size of the clusters that need the migration: one round of
// a recreation of o.scaleServices Services at kube-controller-manager's defaults and raised (the
// provider and the client-go floor; the kubectl loops would add most of an hour), and of a roll
// of o.scaleRoll Deployments with kube-controller-manager raised (the provider at its default and
// at parallelism 50, and the roll's floor).
func (b *bench) scale(ctx context.Context) error {
	wanted := func(string, string) bool { return true }
	if b.o.scaleOnly != "" {
		only, err := regexp.Compile(b.o.scaleOnly)
		if err != nil {
			return fmt.Errorf("-scale-only: %w", err)
		}
		wanted = func(setting, who string) bool { return only.MatchString(setting + "/" + who) }
	}
	n := b.o.scaleServices
	recreate := fmt.Sprintf("4. recreate %d Services", n)
	for _, s := range []struct {
		setting string
		flags   []string
	}{{settingDefaults, kcmDefaults}, {settingRaised, kcmRaised}} {
		// Set-up and teardown at full speed; the move alone at the setting.
		if err := b.c.RestartControllerManager(ctx, kcmUnbound...); err != nil {
			return err
		}
		for _, who := range []string{"k8scidr", "floor (client-go)"} {
			if !wanted(s.setting, who) {
				continue
			}
			if err := b.once(ctx, recreate, s.setting, who, func(run int) (measure, error) { return b.recreateOnce(ctx, run, who, n, s.flags) }); err != nil {
				return err
			}
		}
	}
	if err := b.c.RestartControllerManager(ctx, kcmRaised...); err != nil {
		return err
	}
	roll := fmt.Sprintf("5. roll %d Deployments", b.o.scaleRoll)
	for _, who := range []string{"k8scidr", rollBest, rollFloor} {
		if !wanted(settingRaised, "roll "+who) {
			continue
		}
		if err := b.once(ctx, roll, settingRaised, who, func(run int) (measure, error) { return b.rollOnce(ctx, run, who, b.o.scaleRoll) }); err != nil {
			return err
		}
	}
	return nil
}

// once runs one contender once on a cluster doing nothing else, and records it.
func (b *bench) once(ctx context.Context, scenario, setting, who string, f func(run int) (measure, error)) error {
	logf("%s, %s: %s", scenario, setting, who)
	if err := waitNamespacesGone(ctx, b.kube); err != nil {
		return err
	}
	m, err := f(b.nextRun())
	if err != nil {
		return fmt.Errorf("%s, %s: %w", scenario, who, err)
	}
	b.table.add(scenario, setting, who, m)
	return nil
}
