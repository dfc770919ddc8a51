/*
 * kube_fields.h - field selectors over pods.
 *
 * A field selector (the fieldSelector query parameter) is a comma-separated
 * list of terms `field=value`, `field==value` or `field!=value`, with "\",
 * "," and "=" in values escaped by a backslash, as k8s.io/apimachinery's
 * fields.ParseSelector reads them. Only the fields the real server supports
 * for pods are accepted (metadata.name, metadata.namespace, spec.nodeName,
 * spec.restartPolicy, spec.schedulerName, spec.serviceAccountName,
 * spec.hostNetwork, status.phase, status.podIP, status.nominatedNodeName);
 * any other is "field label not supported", a 400.
 *
 * Pure; kube_selector.h turns the terms into requirements.
 */
#ifndef KVI_KUBEAPI_KUBE_FIELDS_H
#define KVI_KUBEAPI_KUBE_FIELDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"

typedef struct kube_field_term {
	char *key;
	bool negated; /* != */
	char *value;  /* unescaped */
} kube_field_term;

/* kube_fields_parse parses text into *terms (kube_fields_free) and their
 * number *n. Returns KVI_EINVAL with a message in err (errlen bytes). */
kvi_err kube_fields_parse(const char *text, kube_field_term **terms, size_t *n,
			  char *err, size_t errlen);

void kube_fields_free(kube_field_term *terms, size_t n);

/* kube_fields_value returns the value of a supported field of pod as the
 * real server sees it: "" when absent, "true"/"false" for booleans. */
const char *kube_fields_value(const json_t *pod, const char *key);

#endif /* KVI_KUBEAPI_KUBE_FIELDS_H */
