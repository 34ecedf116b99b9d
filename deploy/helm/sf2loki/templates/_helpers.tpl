{{/*
name is the app.kubernetes.io/name label (and selector): the chart's name,
or nameOverride.
*/}}
{{- define "sf2loki.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
fullname names every object of the release: the release name (as in every
chart version so far), or fullnameOverride. The Lease and the state
objects derive from it (sf2loki.leaseName, sf2loki.objectPrefix).
*/}}
{{- define "sf2loki.fullname" -}}
{{- .Values.fullnameOverride | default .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sf2loki.labels" -}}
{{ include "sf2loki.selector" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{- define "sf2loki.selector" -}}
app.kubernetes.io/name: {{ include "sf2loki.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* podLabels are podLabels and the selector; the selector wins a clash. */}}
{{- define "sf2loki.podLabels" -}}
{{- toYaml (merge (include "sf2loki.selector" . | fromYaml) (.Values.podLabels | default dict)) -}}
{{- end -}}

{{- define "sf2loki.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sf2loki.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* k8sLease is "true" when the lease is a coordination.k8s.io Lease. */}}
{{- define "sf2loki.k8sLease" -}}
{{- eq (.Values.config.coordinate.type | default "noop") "k8s_lease" -}}
{{- end -}}

{{/*
The names that keep two releases apart: a blank name in config takes one
derived from the release, so two releases in one namespace never share a
Lease and two releases (of different names) in one bucket never share an
object. For the release "sf2loki" they are sf2loki's own defaults
(sf2loki-leader, sf2loki/state.json, sf2loki/leader.lease).
*/}}
{{- define "sf2loki.leaseName" -}}
{{- $l := .Values.config.coordinate.k8s_lease | default dict -}}
{{- $l.name | default (printf "%s-leader" (include "sf2loki.fullname" .)) -}}
{{- end -}}

{{- define "sf2loki.objectPrefix" -}}
{{- include "sf2loki.fullname" . -}}/
{{- end -}}

{{/*
leaseNames is the JSON list of every Lease sf2loki reads and patches: the
configured one and, with config.orgs, the Lease <lease>-<org> of every org
after the first (the first org keeps the configured Lease) and the
replicas' membership Lease <lease>-members (internal/config/shards.go).
*/}}
{{- define "sf2loki.leaseNames" -}}
{{- $lease := include "sf2loki.leaseName" . -}}
{{- $names := list $lease -}}
{{- $orgs := .Values.config.orgs | default list -}}
{{- range $i, $org := $orgs -}}
{{- $name := required (printf "config.orgs[%d].name is required" $i) ($org | default dict).name -}}
{{- if gt $i 0 -}}
{{- $names = append $names (printf "%s-%s" $lease $name) -}}
{{- end -}}
{{- end -}}
{{- if $orgs -}}
{{- $names = append $names (printf "%s-members" $lease) -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}

{{/*
named is the JSON list of the object names the chart derives, for the
configuration cfg (after defaulting): [value path, name, sf2loki's own
default] for the lease and the state store in use.
*/}}
{{- define "sf2loki.named" -}}
{{- $cfg := .cfg -}}
{{- $out := list -}}
{{- $type := $cfg.coordinate.type | default "noop" -}}
{{- if eq $type "k8s_lease" -}}
{{- $out = append $out (list "config.coordinate.k8s_lease.name" (list "coordinate" "k8s_lease" "name") "sf2loki-leader") -}}
{{- else if eq $type "s3_lease" -}}
{{- $out = append $out (list "config.coordinate.s3_lease.key" (list "coordinate" "s3_lease" "key") "sf2loki/leader.lease") -}}
{{- else if eq $type "gcs_lease" -}}
{{- $out = append $out (list "config.coordinate.gcs_lease.object_name" (list "coordinate" "gcs_lease" "object_name") "sf2loki/leader.lease") -}}
{{- end -}}
{{- $store := $cfg.state.store | default "file" -}}
{{- if eq $store "s3" -}}
{{- $out = append $out (list "config.state.s3.key" (list "state" "s3" "key") "sf2loki/state.json") -}}
{{- else if eq $store "gcs" -}}
{{- $out = append $out (list "config.state.gcs.object_name" (list "state" "gcs" "object_name") "sf2loki/state.json") -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* dig3 reads cfg[a][b][c] as a string ("" when any level is missing). */}}
{{- define "sf2loki.dig3" -}}
{{- $p := .path -}}
{{- $a := index .cfg (index $p 0) | default dict -}}
{{- $b := index $a (index $p 1) | default dict -}}
{{- index $b (index $p 2) | default "" -}}
{{- end -}}

{{/* config is the rendered sf2loki configuration. */}}
{{- define "sf2loki.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- $type := $cfg.coordinate.type | default "noop" -}}
{{- if and (ne $type "noop") (lt (int .Values.replicaCount) 2) -}}
{{- fail "replicaCount must be at least 2 for an HA coordinator (or set config.coordinate.type: noop and replicaCount: 1)" -}}
{{- end -}}
{{- if and (eq $type "noop") (gt (int .Values.replicaCount) 1) -}}
{{- fail "config.coordinate.type noop runs a single instance: set replicaCount: 1, or choose k8s_lease, s3_lease or gcs_lease" -}}
{{- end -}}
{{- $prefix := include "sf2loki.objectPrefix" . -}}
{{- if eq $type "k8s_lease" -}}
{{- $lease := $cfg.coordinate.k8s_lease | default dict -}}
{{- $_ := set $lease "namespace" ($lease.namespace | default .Release.Namespace) -}}
{{- $_ := set $lease "name" (include "sf2loki.leaseName" .) -}}
{{- $_ := set $cfg.coordinate "k8s_lease" $lease -}}
{{- else if eq $type "s3_lease" -}}
{{- $lease := $cfg.coordinate.s3_lease | default dict -}}
{{- $_ := set $lease "key" ($lease.key | default (printf "%sleader.lease" $prefix)) -}}
{{- $_ := set $cfg.coordinate "s3_lease" $lease -}}
{{- else if eq $type "gcs_lease" -}}
{{- $lease := $cfg.coordinate.gcs_lease | default dict -}}
{{- $_ := set $lease "object_name" ($lease.object_name | default (printf "%sleader.lease" $prefix)) -}}
{{- $_ := set $cfg.coordinate "gcs_lease" $lease -}}
{{- end -}}
{{- $store := $cfg.state.store | default "file" -}}
{{- if eq $store "s3" -}}
{{- $s3 := $cfg.state.s3 | default dict -}}
{{- if not $s3.bucket -}}
{{- fail "config.state.s3.bucket is required when config.state.store is s3" -}}
{{- end -}}
{{- $_ := set $s3 "key" ($s3.key | default (printf "%sstate.json" $prefix)) -}}
{{- $_ := set $cfg.state "s3" $s3 -}}
{{- else if eq $store "gcs" -}}
{{- $gcs := $cfg.state.gcs | default dict -}}
{{- if not $gcs.bucket -}}
{{- fail "config.state.gcs.bucket is required when config.state.store is gcs" -}}
{{- end -}}
{{- $_ := set $gcs "object_name" ($gcs.object_name | default (printf "%sstate.json" $prefix)) -}}
{{- $_ := set $cfg.state "gcs" $gcs -}}
{{- end -}}
{{- include "sf2loki.keepNames" (dict "ctx" . "cfg" $cfg) -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
keepNames refuses an upgrade that would move a release's Lease or state
object: where a name was left blank (so the chart derives it from the
release) and the release's ConfigMap in the cluster names another one
(charts up to 0.1.0 used sf2loki-leader and sf2loki/state.json for every
release; a new fullnameOverride derives new names), the fix is to set that
name. The ConfigMap is found by its name, else by Helm's release-name
annotation (a renamed release). lookup reads the cluster only in
helm install/upgrade (and --dry-run=server); helm template and helm lint
see nothing and skip this: read the chart README's upgrade notes.
*/}}
{{- define "sf2loki.keepNames" -}}
{{- $ctx := .ctx -}}
{{- $old := lookup "v1" "ConfigMap" $ctx.Release.Namespace (include "sf2loki.fullname" $ctx) -}}
{{- if not $old -}}
{{- /* A changed fullnameOverride renames the ConfigMap: find the release's own by Helm's annotation. */ -}}
{{- range $cm := (lookup "v1" "ConfigMap" $ctx.Release.Namespace "").items | default list -}}
{{- $ann := $cm.metadata.annotations | default dict -}}
{{- if and (eq (index $ann "meta.helm.sh/release-name" | default "") $ctx.Release.Name) (index ($cm.data | default dict) "config.yaml") -}}
{{- $old = $cm -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $oldYAML := "" -}}
{{- if $old -}}
{{- $oldYAML = index ($old.data | default dict) "config.yaml" | default "" -}}
{{- end -}}
{{- if $oldYAML -}}
{{- $oldCfg := $oldYAML | fromYaml -}}
{{- $oldNamed := include "sf2loki.named" (dict "cfg" $oldCfg) | fromJsonArray -}}
{{- $moves := list -}}
{{- $sets := list -}}
{{- range $n := include "sf2loki.named" (dict "cfg" .cfg) | fromJsonArray -}}
{{- $path := index $n 0 -}}
{{- $given := include "sf2loki.dig3" (dict "cfg" $ctx.Values.config "path" (index $n 1)) -}}
{{- $now := include "sf2loki.dig3" (dict "cfg" $.cfg "path" (index $n 1)) -}}
{{- range $o := $oldNamed -}}
{{- if eq (index $o 0) $path -}}
{{- $was := include "sf2loki.dig3" (dict "cfg" $oldCfg "path" (index $o 1)) | default (index $o 2) -}}
{{- if and (not $given) (ne $was $now) -}}
{{- $moves = append $moves (printf "%s from %q to %q" $path $was $now) -}}
{{- $sets = append $sets (printf "%s=%s" $path $was) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $moves -}}
{{- fail (printf "this upgrade would move the release's %s (the chart now names them after the release): a new pod would lead beside an old one and start without the checkpoints. Keep them: set %s (in your values file, or --set), then upgrade again; see the chart README, \"Upgrading\"" (join " and " $moves) (join " and " $sets)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
