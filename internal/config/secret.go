package config

import (
	"maps"
	"reflect"
	"slices"
)

// Secret is one secret the configuration holds or points at: the value of
// a key tagged secret (each value of a secret map is one), and the file
// key beside it (<key>_file) that may hold the secret instead.
type Secret struct {
	// Path is the key as problems show it, e.g. orgs[1].salesforce.client_secret.
	Path  string
	Value string
	// File is the value of <key>_file, or "".
	File string
}

// Secrets returns every secret key of c (list items included) with its
// value and its file.
func (c *Config) Secrets() []Secret {
	strs := map[string]string{}
	var out []Secret
	c.eachLeaf(func(f Field, v reflect.Value, path string) {
		switch {
		case f.Secret && v.Kind() == reflect.Map:
			for _, k := range slices.Sorted(maps.Keys(v.Interface().(map[string]string))) {
				out = append(out, Secret{Path: path + "." + k, Value: v.MapIndex(reflect.ValueOf(k)).String()})
			}
		case f.Secret:
			out = append(out, Secret{Path: path, Value: v.String()})
		case v.Kind() == reflect.String:
			strs[path] = v.String()
		}
	})
	for i := range out {
		out[i].File = strs[out[i].Path+"_file"]
	}
	return out
}
