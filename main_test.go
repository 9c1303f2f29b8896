package main

import (
	"os"
	"testing"
)

func TestQuietFrameworkTrace(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want string // TF_LOG_SDK_FRAMEWORK afterwards; "" unset
	}{
		{"nothing asked", nil, "DEBUG"},
		{"TF_LOG=DEBUG", map[string]string{"TF_LOG": "DEBUG"}, "DEBUG"},
		{"TF_LOG=trace", map[string]string{"TF_LOG": "trace"}, ""},
		{"TF_LOG_PROVIDER=TRACE", map[string]string{"TF_LOG_PROVIDER": "TRACE"}, ""},
		{"TF_LOG_SDK=TRACE", map[string]string{"TF_LOG_SDK": "TRACE"}, ""},
		{"the user's own level", map[string]string{"TF_LOG_SDK_FRAMEWORK": "WARN"}, "WARN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, v := range []string{"TF_LOG", "TF_LOG_PROVIDER", "TF_LOG_SDK", "TF_LOG_SDK_FRAMEWORK"} {
				t.Setenv(v, "")
				_ = os.Unsetenv(v)
			}
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			quietFrameworkTrace()
			if got := os.Getenv("TF_LOG_SDK_FRAMEWORK"); got != c.want {
				t.Errorf("TF_LOG_SDK_FRAMEWORK = %q, want %q", got, c.want)
			}
		})
	}
}
