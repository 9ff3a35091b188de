{{/* Names. */}}
{{- define "strata.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "strata.headless" -}}{{ include "strata.fullname" . }}-headless{{- end -}}
{{- define "strata.etcd" -}}{{ include "strata.fullname" . }}-etcd{{- end -}}

{{- define "strata.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "strata.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Labels; pass (dict "ctx" $ "component" "node"). */}}
{{- define "strata.selectorLabels" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "strata.labels" -}}
{{ include "strata.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version }}
{{- end -}}

{{/* The etcd client URLs the nodes use. */}}
{{- define "strata.etcdEndpoints" -}}
{{- $out := list -}}
{{- if .Values.etcd.enabled -}}
{{- $svc := include "strata.etcd" . -}}
{{- range $i := until (int .Values.etcd.replicas) -}}
{{- $out = append $out (printf "http://%s-%d.%s.%s.svc:2379" $svc $i $svc $.Release.Namespace) -}}
{{- end -}}
{{- else -}}
{{- $out = required "etcd.endpoints: give an external etcd's client URLs, or set etcd.enabled" .Values.etcd.endpoints -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* stratad's config file: values.config plus what the chart decides. */}}
{{- define "strata.stratadConfig" -}}
{{- $c := deepCopy .Values.config -}}
{{- $_ := set $c "listen" (printf "0.0.0.0:%v" .Values.ports.grpc) -}}
{{- $_ = set $c "raw-listen" (printf "0.0.0.0:%v" .Values.ports.raw) -}}
{{- $_ = set $c "gossip-addr" (printf "0.0.0.0:%v" .Values.ports.gossip) -}}
{{- $_ = set $c "admin-listen" (printf "0.0.0.0:%v" .Values.ports.admin) -}}
{{- $_ = set $c "data-dir" "/var/lib/strata" -}}
{{- $_ = set $c "ssd-dir" "/var/lib/strata/ssd" -}}
{{- $_ = set $c "etcd" (include "strata.etcdEndpoints" . | fromJsonArray) -}}
{{- if .Values.gpu.enabled -}}
{{- $tiers := default (list "host" "ssd") (get $c "tiers") -}}
{{- if not (has "gpu" $tiers) -}}{{- $tiers = prepend $tiers "gpu" -}}{{- end -}}
{{- $_ = set $c "tiers" $tiers -}}
{{- $_ = set $c "gpu-bytes" .Values.gpu.bytes -}}
{{- $_ = set $c "gpu-device" (toString .Values.gpu.device) -}}
{{- end -}}
{{- if .Values.auth.existingSecret -}}
{{- $_ = set $c "tenant-token-file" (list (printf "/etc/strata/auth/%s" .Values.auth.tenantsKey)) -}}
{{- if .Values.auth.adminTokenKey -}}
{{- $_ = set $c "admin-token-file" (printf "/etc/strata/auth/%s" .Values.auth.adminTokenKey) -}}
{{- end -}}
{{- end -}}
{{- if .Values.tls.enabled -}}
{{- $_ = set $c "tls-cert" "/etc/strata/tls/tls.crt" -}}
{{- $_ = set $c "tls-key" "/etc/strata/tls/tls.key" -}}
{{- $_ = set $c "tls-ca" "/etc/strata/tls/ca.crt" -}}
{{- if .Values.tls.clientAuth -}}
{{- $_ = set $c "tls-client-auth" true -}}
{{- end -}}
{{- end -}}
{{- toYaml $c -}}
{{- end -}}
