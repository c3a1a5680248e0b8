{{/* Names, labels and images shared by the templates. */}}

{{- define "procmesh-operator.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name: the release name alone when it already contains the chart name. */}}
{{- define "procmesh-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "procmesh-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "procmesh-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "procmesh-operator.labels" -}}
{{ include "procmesh-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: procmesh
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "procmesh-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "procmesh-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "procmesh-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The proc server image rendered into meshes without spec.template.image. */}}
{{- define "procmesh-operator.procServerImage" -}}
{{- $image := .Values.operator.procServerImage -}}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) -}}
{{- end -}}

{{/* The namespaces whose objects the operator manages (watch.allNamespaces false). */}}
{{- define "procmesh-operator.namespaces" -}}
{{- if and (not .Values.watch.allNamespaces) (empty .Values.watch.namespaces) -}}
{{- fail "watch.namespaces must list at least one namespace when watch.allNamespaces is false" -}}
{{- end -}}
{{- toJson (uniq .Values.watch.namespaces) -}}
{{- end -}}
