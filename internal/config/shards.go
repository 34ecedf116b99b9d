package config

import (
	"fmt"
	pathpkg "path"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
)

// OrgLabels are the stream labels each org sets on its own entries when
// orgs are configured (org=<name>, sf_org_id=<its org id>); sink.loki.labels
// may not set them then.
var OrgLabels = []string{"org", "sf_org_id"}

// orgName is what an org's name may be: it names the org's shard objects
// (a path segment, a Kubernetes name suffix) and its org label.
var orgName = regexp.MustCompile(`^[a-z0-9-]{1,40}$`)

// Shard object names. The first org keeps the configured names; every
// other org's lease and checkpoint objects go under shards/<org>/ beside
// the configured ones, and the replicas' membership document is
// shards/members.json beside the lease (Kubernetes Leases take the suffix
// -<org> or -members instead).
const (
	shardsDir     = "shards"
	membersObject = "members.json"
	membersSuffix = "members"
)

// Shards returns each shard's configuration. In the single-org form (no
// orgs) it is c itself, with ShardName "". With orgs it is one deep copy of
// c per org, in the order listed: Salesforce and Sources are the org's,
// ShardName is its name, Orgs is nil, and the lease and checkpoint objects
// of every coordinator and store type are the shard's:
//
//   - the first org keeps the configured names exactly, so that a
//     single-org deployment that lists its org first keeps its lease and
//     its checkpoints (old and new replicas contend for the same lease
//     during a rolling upgrade);
//   - every other org's S3 key or GCS object dir/base becomes
//     dir/shards/<org>/base (a key without a directory: shards/<org>/base),
//     a file path likewise (filepath.Join(dir, "shards", org, base)), and a
//     Kubernetes Lease <name> becomes <name>-<org>.
//
// Editing one copy never changes another, nor c.
func (c *Config) Shards() []*Config {
	if len(c.Orgs) == 0 {
		return []*Config{c}
	}
	out := make([]*Config, 0, len(c.Orgs))
	shared := *c
	shared.Orgs = nil // copied once per shard below: one org each
	for i := range c.Orgs {
		s := shared.clone()
		o := deepCopy(reflect.ValueOf(c.Orgs[i])).Interface().(Org)
		s.ShardName, s.OrgCount, s.OrgSiblings = o.Name, len(c.Orgs), c.siblingsOf(i)
		s.Salesforce, s.Sources = o.Salesforce, o.Sources
		if i > 0 {
			s.Coordinate.FileLease.Path = shardPath(s.Coordinate.FileLease.Path, o.Name)
			s.Coordinate.K8sLease.Name = suffixName(s.Coordinate.K8sLease.Name, o.Name)
			s.Coordinate.S3Lease.Key = shardKey(s.Coordinate.S3Lease.Key, o.Name)
			s.Coordinate.GCSLease.ObjectName = shardKey(s.Coordinate.GCSLease.ObjectName, o.Name)
			s.State.File.Path = shardPath(s.State.File.Path, o.Name)
			s.State.S3.Key = shardKey(s.State.S3.Key, o.Name)
			s.State.GCS.ObjectName = shardKey(s.State.GCS.ObjectName, o.Name)
		}
		out = append(out, s)
	}
	return out
}

// MembersConfig returns a deep copy of c whose coordinate lease object, of
// every coordinator type, is the membership document all replicas of a
// multi-org deployment share (beside the configured lease, in the same
// bucket, endpoint or namespace): an S3 key or GCS object dir/base becomes
// dir/shards/members.json (a key without a directory:
// shards/members.json), a file path likewise, a Kubernetes Lease <name>
// becomes <name>-members. Call it on the loaded configuration, not on a
// shard. It is nil in the single-org form and with coordinate.type noop,
// where there is no one to balance with. Validate refuses a configuration
// where it is the same object as any shard's lease or checkpoint document.
func (c *Config) MembersConfig() *Config {
	if len(c.Orgs) == 0 || c.Coordinate.Type == CoordinateNoop {
		return nil
	}
	m := c.clone()
	m.ShardName = ""
	m.Coordinate.FileLease.Path = membersPath(m.Coordinate.FileLease.Path)
	m.Coordinate.K8sLease.Name = suffixName(m.Coordinate.K8sLease.Name, membersSuffix)
	m.Coordinate.S3Lease.Key = membersKey(m.Coordinate.S3Lease.Key)
	m.Coordinate.GCSLease.ObjectName = membersKey(m.Coordinate.GCSLease.ObjectName)
	return m
}

// shardKey is an object key in the shards/<org>/ directory beside key.
func shardKey(key, org string) string {
	if key == "" {
		return ""
	}
	dir, base := pathpkg.Split(key)
	return dir + shardsDir + "/" + org + "/" + base
}

// membersKey is shards/members.json beside key.
func membersKey(key string) string {
	if key == "" {
		return ""
	}
	dir, _ := pathpkg.Split(key)
	return dir + shardsDir + "/" + membersObject
}

// shardPath is a file in the shards/<org>/ directory beside p.
func shardPath(p, org string) string {
	if p == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(p), shardsDir, org, filepath.Base(p))
}

// membersPath is shards/members.json beside p.
func membersPath(p string) string {
	if p == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(p), shardsDir, membersObject)
}

// suffixName is a Kubernetes name with -suffix.
func suffixName(name, suffix string) string {
	if name == "" {
		return ""
	}
	return name + "-" + suffix
}

// clone is a deep copy of c: no map or slice is shared with c.
func (c *Config) clone() *Config {
	out := deepCopy(reflect.ValueOf(*c)).Interface().(Config)
	return &out
}

// deepCopy copies v with every map, slice and pointer it holds copied too.
func deepCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if out.Field(i).CanSet() {
				out.Field(i).Set(deepCopy(v.Field(i)))
			}
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(deepCopy(v.Index(i)))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(deepCopy(it.Key()), deepCopy(it.Value()))
		}
		return out
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(deepCopy(v.Elem()))
		return out
	}
	return v
}

// validateOrgNames checks every org's name: the pattern, and unique. It
// reports whether all are fine.
func (c *Config) validateOrgNames(add func(path, format string, args ...any)) bool {
	ok := true
	first := map[string]int{}
	for i, o := range c.Orgs {
		path := fmt.Sprintf("orgs[%d].name", i)
		switch j, dup := first[o.Name]; {
		case o.Name == "":
			add(path, "required: every orgs entry needs a name of 1 to 40 of a-z, 0-9 and - (it names the org's lease and checkpoint objects)")
		case !orgName.MatchString(o.Name):
			add(path, "%q is not an org name: 1 to 40 of a-z, 0-9 and - (it names the org's lease and checkpoint objects)", o.Name)
		case dup:
			add(path, "%q is also the name of orgs[%d]; org names must be unique", o.Name, j)
		default:
			first[o.Name] = i
			continue
		}
		ok = false
	}
	return ok
}

// setBesideOrgs lists the keys of the top-level section (salesforce or
// sources) that differ from their defaults.
func (c *Config) setBesideOrgs(section string) []string {
	def, cur := reflect.ValueOf(Defaults()).Elem(), reflect.ValueOf(c).Elem()
	var keys []string
	for _, f := range levelFields()[""] {
		rel, ok := strings.CutPrefix(f.Path, section+".")
		if !ok || (f.Section && !f.List) {
			continue
		}
		a, b := cur.FieldByIndex(f.index), def.FieldByIndex(f.index)
		if (a.Kind() == reflect.Slice || a.Kind() == reflect.Map) && a.Len() == 0 && b.Len() == 0 {
			continue
		}
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			keys = append(keys, rel)
		}
	}
	return keys
}

// shardObject is one object a multi-org deployment writes: a shard's lease
// or checkpoint document, or the membership document.
type shardObject struct {
	id    string // the object as its store addresses it
	file  string // for a file: its canonical path
	show  string // for messages, e.g. s3://bucket/key
	what  string // e.g. org "b"'s lease
	blame string // the key to change
}

// shardObjects lists every object the shards and the membership document
// use, as the stores will address them (see leaseIsCheckpoint), each with
// the key to change when it aliases another.
func (c *Config) shardObjects() []shardObject {
	var out []shardObject
	lease := func(s *Config, what, k8sBlame string) {
		switch l := s.Coordinate; l.Type {
		case CoordinateS3Lease:
			out = append(out, s3Object(l.S3Lease.S3Object, what, "coordinate.s3_lease.key"))
		case CoordinateGCSLease:
			out = append(out, gcsObject(l.GCSLease.GCSObject, what, "coordinate.gcs_lease.object_name"))
		case CoordinateFileLease:
			out = append(out, fileObject(l.FileLease.Path, what, "coordinate.file_lease.path"))
		case CoordinateK8sLease:
			if l.K8sLease.Name == "" {
				return // required: reported as such
			}
			id := l.K8sLease.Namespace + "/" + l.K8sLease.Name
			out = append(out, shardObject{id: "k8s|" + id, show: "the Lease " + id, what: what, blame: k8sBlame})
		}
	}
	for i, s := range c.Shards() {
		what := fmt.Sprintf("org %q's ", s.ShardName)
		// A Kubernetes Lease can only meet another through an org's name
		// (an org named members).
		k8sBlame := "coordinate.k8s_lease.name"
		if i > 0 {
			k8sBlame = fmt.Sprintf("orgs[%d].name", i)
		}
		lease(s, what+"lease", k8sBlame)
		switch s.State.Store {
		case StoreS3:
			out = append(out, s3Object(s.State.S3, what+"checkpoint document", "state.s3.key"))
		case StoreGCS:
			out = append(out, gcsObject(s.State.GCS, what+"checkpoint document", "state.gcs.object_name"))
		case StoreFile:
			out = append(out, fileObject(s.State.File.Path, what+"checkpoint document", "state.file.path"))
		}
		if i == 0 {
			if m := c.MembersConfig(); m != nil {
				lease(m, "the membership document", "coordinate.k8s_lease.name")
			}
		}
	}
	return out
}

func s3Object(o S3Object, what, key string) shardObject {
	if o.Bucket == "" || o.Key == "" {
		return shardObject{} // required: reported as such
	}
	return shardObject{id: "s3|" + endpointIdentity(o.EndpointURL) + "|" + o.Bucket + "|" + o.Key,
		show: "s3://" + o.Bucket + "/" + o.Key, what: what, blame: key}
}

func gcsObject(o GCSObject, what, key string) shardObject {
	if o.Bucket == "" || o.ObjectName == "" {
		return shardObject{}
	}
	return shardObject{id: "gcs|" + o.Bucket + "|" + o.ObjectName, show: "gs://" + o.Bucket + "/" + o.ObjectName, what: what, blame: key}
}

func fileObject(p, what, key string) shardObject {
	if p == "" {
		return shardObject{}
	}
	canon := canonicalPath(p)
	return shardObject{id: "file|" + canon, file: canon, show: "file://" + canon, what: what, blame: key}
}

// shardObjectsAlias finds two of the shards' and the membership document's
// objects that are one (or, for files, where one is the other's lock file
// or inside it). It returns the key to blame and what to do.
func (c *Config) shardObjectsAlias() (path, msg string) {
	const rule = "every org's lease and checkpoint document and the membership document must be separate objects " +
		"(the first org uses the configured names, every other org's are derived as dir/shards/<org>/base, " +
		"the membership document is dir/shards/members.json beside the lease)"
	objects := c.shardObjects()
	byID := map[string]shardObject{}
	files := map[string]shardObject{}
	for _, o := range objects {
		if o.id == "" {
			continue // a required key is missing: reported as such
		}
		if prev, dup := byID[o.id]; dup {
			if strings.HasPrefix(o.id, "k8s|") {
				return o.blame, fmt.Sprintf("%s and %s are both %s; every org's Lease and the membership Lease must differ "+
					"(the first org's is coordinate.k8s_lease.name, every other org's <name>-<org>, the membership Lease's <name>-members): rename the org",
					prev.what, o.what, o.show)
			}
			return o.blame, fmt.Sprintf("%s and %s are the same object (%s); %s: give %s another directory or name, "+
				"so that neither sits in the other's shards/ directory", prev.what, o.what, o.show, rule, o.blame)
		}
		byID[o.id] = o
		if o.file != "" {
			files[o.file] = o
		}
	}
	for _, o := range objects {
		if o.file == "" {
			continue
		}
		if other, ok := files[o.file+".lock"]; ok {
			return other.blame, fmt.Sprintf("%s (%s) is the lock file (<path>.lock) of %s (%s); %s: give %s another name",
				other.what, other.show, o.what, o.show, rule, other.blame)
		}
		for dir := filepath.Dir(o.file); filepath.Dir(dir) != dir; dir = filepath.Dir(dir) {
			if other, ok := files[dir]; ok {
				return other.blame, fmt.Sprintf("%s (%s) is inside %s (%s), which must be a file; %s: give %s another name",
					o.what, o.show, other.what, other.show, rule, other.blame)
			}
		}
	}
	return "", ""
}
