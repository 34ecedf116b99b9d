{{- define "sf2loki.name" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sf2loki.labels" -}}
app.kubernetes.io/name: sf2loki
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "sf2loki.selector" -}}
app.kubernetes.io/name: sf2loki
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sf2loki.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sf2loki.name" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* k8sLease is "true" when the lease is a coordination.k8s.io Lease. */}}
{{- define "sf2loki.k8sLease" -}}
{{- eq (.Values.config.coordinate.type | default "noop") "k8s_lease" -}}
{{- end -}}

{{/* leaseName is the k8s_lease Lease name. */}}
{{- define "sf2loki.leaseName" -}}
{{- $l := .Values.config.coordinate.k8s_lease | default dict -}}
{{- $l.name | default "sf2loki-leader" -}}
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
{{- if eq $type "k8s_lease" -}}
{{- $lease := merge (dict "namespace" .Release.Namespace "name" "sf2loki-leader") ($cfg.coordinate.k8s_lease | default dict) -}}
{{- $_ := set $cfg.coordinate "k8s_lease" $lease -}}
{{- end -}}
{{- $store := $cfg.state.store | default "file" -}}
{{- if and (eq $store "s3") (not (($cfg.state.s3 | default dict).bucket)) -}}
{{- fail "config.state.s3.bucket is required when config.state.store is s3" -}}
{{- end -}}
{{- if and (eq $store "gcs") (not (($cfg.state.gcs | default dict).bucket)) -}}
{{- fail "config.state.gcs.bucket is required when config.state.store is gcs" -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}
