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

{{/* An image reference from {repository, tag, digest} and the default tag: repository@digest
when a digest is given (it pins the image and wins over the tag), else repository:tag. */}}
{{- define "procmesh-operator.imageReference" -}}
{{- $image := index . 0 -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default (index . 1) $image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "procmesh-operator.image" -}}
{{- include "procmesh-operator.imageReference" (list .Values.image .Chart.AppVersion) -}}
{{- end -}}

{{/* The proc server image rendered into meshes without spec.template.image. */}}
{{- define "procmesh-operator.procServerImage" -}}
{{- include "procmesh-operator.imageReference" (list .Values.operator.procServerImage .Chart.AppVersion) -}}
{{- end -}}

{{/* The leader election's Lease (release namespace): leaderElection.leaseName, or the release's
full name when that is empty. The default stays procmesh-operator, the name every earlier chart
used: a changed name on upgrade would let a new replica lead on the new Lease while an old one
still leads on the old (the rollout of replicaCount > 1 overlaps them). */}}
{{- define "procmesh-operator.leaseName" -}}
{{- default (include "procmesh-operator.fullname" .) .Values.leaderElection.leaseName -}}
{{- end -}}

{{/* The namespaces whose objects the operator manages (watch.allNamespaces false). */}}
{{- define "procmesh-operator.namespaces" -}}
{{- if and (not .Values.watch.allNamespaces) (empty .Values.watch.namespaces) -}}
{{- fail "watch.namespaces must list at least one namespace when watch.allNamespaces is false" -}}
{{- end -}}
{{- toJson (uniq .Values.watch.namespaces) -}}
{{- end -}}

{{/*
Other releases of this chart in the cluster, found with lookup (so only against a cluster:
`helm template` and client dry runs see none). Fails on what would make two operators fight or
leave one idle: watched namespaces in common (two operators reconciling one mesh each undo the
other's work), either release watching every namespace, and one Lease for two releases in one
namespace (only one of them would ever act). Our own release is the one of our name in our
namespace.
*/}}
{{- define "procmesh-operator.checkOtherReleases" -}}
{{- $name := include "procmesh-operator.name" . -}}
{{- $lease := "" -}}
{{- if .Values.leaderElection.enabled -}}
{{- $lease = printf "--leader-election=%s" (include "procmesh-operator.leaseName" .) -}}
{{- end -}}
{{- $watched := list -}}
{{- if not .Values.watch.allNamespaces -}}
{{- range (include "procmesh-operator.namespaces" . | fromJsonArray) -}}
{{- $watched = append $watched (printf "--namespace=%s" .) -}}
{{- end -}}
{{- end -}}
{{- $deployments := lookup "apps/v1" "Deployment" "" "" -}}
{{- range (get $deployments "items" | default list) -}}
{{- $labels := get .metadata "labels" | default dict -}}
{{- $instance := get $labels "app.kubernetes.io/instance" -}}
{{- $ours := and (eq .metadata.namespace $.Release.Namespace) (eq $instance $.Release.Name) -}}
{{- if and (eq (get $labels "app.kubernetes.io/name") $name) (not $ours) -}}
{{- $other := printf "release %s in namespace %s" $instance .metadata.namespace -}}
{{- $beside := eq .metadata.namespace $.Release.Namespace -}}
{{- range .spec.template.spec.containers -}}
{{- if eq .name "operator" -}}
{{- $args := get . "args" | default list -}}
{{- if has "--all-namespaces" $args -}}
{{- fail (printf "%s watches every namespace, so this release's operator would reconcile meshes that one reconciles too, and they would fight: give each release its own namespaces (watch.allNamespaces=false and watch.namespaces, none in common)" $other) -}}
{{- end -}}
{{- if $.Values.watch.allNamespaces -}}
{{- fail (printf "watch.allNamespaces is true but %s runs already: both operators would reconcile its meshes and fight; set watch.allNamespaces=false and list in watch.namespaces namespaces that release does not watch" $other) -}}
{{- end -}}
{{- $common := list -}}
{{- range $watched -}}
{{- if has . $args -}}
{{- $common = append $common (trimPrefix "--namespace=" .) -}}
{{- end -}}
{{- end -}}
{{- if $common -}}
{{- fail (printf "watch.namespaces has %s, which %s watches too: two operators would reconcile the same meshes and fight; leave them out (no namespace may be watched by two releases)" (join ", " $common) $other) -}}
{{- end -}}
{{- if and $lease $beside (has $lease $args) -}}
{{- fail (printf "%s uses the Lease %s of this namespace, so only one of the two operators would ever act: set leaderElection.leaseName to another name (\"\" for the release's full name, %s)" $other (trimPrefix "--leader-election=" $lease) (include "procmesh-operator.fullname" $)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
