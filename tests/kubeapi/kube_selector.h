/*
 * kube_selector.h - Kubernetes label and field selectors.
 *
 * A selector is the AND of requirements, parsed once from the text of a
 * labelSelector or fieldSelector query parameter and then matched against
 * pod objects. Label selectors follow the grammar of k8s.io/apimachinery
 * labels.Parse: comma-separated requirements `k=v`, `k==v`, `k!=v`, `k`
 * (exists), `!k` (does not exist), `k in (a,b)`, `k notin (a,b)`, `k>n`,
 * `k<n`, with whitespace allowed between tokens; keys must be qualified
 * names and values valid label values, as the real server checks. Field
 * selectors are `f=v`, `f==v`, `f!=v` over the fields the real server
 * supports for pods (parsed by kube_fields.h); a missing field reads as
 * "".
 *
 * `!=` and `notin` match objects that lack the key, like the real server.
 * An empty selector matches everything.
 *
 * Pure: no I/O, no global state. A selector is immutable once parsed and
 * owned by whoever parsed it.
 */
#ifndef KVI_KUBEAPI_KUBE_SELECTOR_H
#define KVI_KUBEAPI_KUBE_SELECTOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"

typedef enum kube_selector_kind {
	KUBE_SELECTOR_LABELS,
	KUBE_SELECTOR_FIELDS,
} kube_selector_kind;

typedef struct kube_selector kube_selector;

/* kube_selector_parse parses text (NULL or "" = match everything) and
 * writes the selector into *out. Returns KVI_EINVAL for malformed text,
 * with a message for a 400 Status in err (errlen bytes). */
kvi_err kube_selector_parse(const char *text, kube_selector_kind kind,
			    kube_selector **out, char *err, size_t errlen);

/* kube_selector_matches returns whether pod (a pod object; NULL matches
 * nothing) satisfies every requirement of s (NULL matches everything). */
bool kube_selector_matches(const kube_selector *s, const json_t *pod);

/* kube_selector_empty returns whether s has no requirement. */
bool kube_selector_empty(const kube_selector *s);

void kube_selector_free(kube_selector *s);

#endif /* KVI_KUBEAPI_KUBE_SELECTOR_H */
