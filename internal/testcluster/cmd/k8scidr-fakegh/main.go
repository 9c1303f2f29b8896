// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Command k8scidr-fakegh stands in for the GitHub CLI in the tests of examples/ci: the `gh api`
// calls the kit's scripts make on a pull request's comments (list, create, edit), against a JSON
// file (FAKEGH_STORE), with --jq evaluated by gojq as gh itself does. Each call is appended to
// FAKEGH_STORE.log, so a test can read the sequence.
//
//	gh api [--paginate] [--method GET|POST|PATCH] PATH [--jq EXPR] [-F body=@FILE | -f body=TEXT]
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/itchyny/gojq"
)

// Comment is an issue comment as the GitHub API returns it (the fields the kit reads).
type Comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	} `json:"user"`
}

// Store is the fake's state.
type Store struct {
	NextID   int64     `json:"next_id"`
	Comments []Comment `json:"comments"`
}

var (
	listPath = regexp.MustCompile(`^repos/[^/]+/[^/]+/issues/\d+/comments$`)
	editPath = regexp.MustCompile(`^repos/[^/]+/[^/]+/issues/comments/(\d+)$`)
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fake gh:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || args[0] != "api" {
		return fmt.Errorf("only `gh api` is faked, not %q", args)
	}
	method, path, jq, body := "GET", "", "", ""
	for i := 1; i < len(args); i++ {
		switch a := args[i]; a {
		case "--paginate":
		case "--method", "-X":
			i++
			method = args[i]
		case "--jq", "-q":
			i++
			jq = args[i]
		case "-F", "-f", "--field", "--raw-field":
			i++
			k, v, _ := strings.Cut(args[i], "=")
			if k != "body" {
				return fmt.Errorf("field %q", k)
			}
			if file, ok := strings.CutPrefix(v, "@"); ok && a != "-f" && a != "--raw-field" {
				b, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				v = string(b)
			}
			body = v
		default:
			if strings.HasPrefix(a, "-") || path != "" {
				return fmt.Errorf("argument %q", a)
			}
			path = a
		}
	}
	file := os.Getenv("FAKEGH_STORE")
	if file == "" {
		return errors.New("FAKEGH_STORE is not set")
	}
	var s Store
	if b, err := os.ReadFile(file); err == nil {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	logf, err := os.OpenFile(file+".log", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	if _, err := fmt.Fprintf(logf, "%s %s\n", method, path); err != nil {
		return err
	}
	var out any
	switch {
	case method == "GET" && listPath.MatchString(path):
		out = s.Comments
		if s.Comments == nil { // a pull request without comments: GitHub answers [], as gh --jq expects
			out = []Comment{}
		}
	case method == "POST" && listPath.MatchString(path):
		s.NextID++
		c := Comment{ID: s.NextID, Body: body}
		c.User.Login, c.User.Type = "github-actions[bot]", "Bot"
		s.Comments = append(s.Comments, c)
		out = c
	case method == "PATCH" && editPath.MatchString(path):
		id, _ := strconv.ParseInt(editPath.FindStringSubmatch(path)[1], 10, 64)
		found := false
		for i := range s.Comments {
			if s.Comments[i].ID == id {
				s.Comments[i].Body, found, out = body, true, s.Comments[i]
			}
		}
		if !found {
			return fmt.Errorf("no comment %d", id)
		}
	default:
		return fmt.Errorf("%s %s is not faked", method, path)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		return err
	}
	return output(out, jq)
}

// output writes v as gh does: JSON, or each result of the jq expression (strings raw).
func output(v any, expr string) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if expr == "" {
		_, err := os.Stdout.Write(append(b, '\n'))
		return err
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return err
	}
	q, err := gojq.Parse(expr)
	if err != nil {
		return err
	}
	iter := q.Run(generic)
	for {
		r, ok := iter.Next()
		if !ok {
			return nil
		}
		if err, ok := r.(error); ok {
			return err
		}
		switch x := r.(type) {
		case string:
			fmt.Println(x)
		default:
			j, _ := json.Marshal(x)
			fmt.Println(string(j))
		}
	}
}
