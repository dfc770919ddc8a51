/*
 * kube_list.h - PodList pages: filtering, limit and continue tokens.
 *
 * A list without a limit returns every matching pod at the current
 * resourceVersion. With a limit, a page holds at most that many items; when
 * keys remain after the last item (in the namespace, before filtering, like
 * etcd's range read behind the real server), the list carries a continue
 * token and the whole pod set is kept as a snapshot in the store, so that
 * every later page is read from the same state at the first page's
 * resourceVersion. remainingItemCount is set only when there is no
 * selector, as the real server does.
 *
 * Continue tokens have the real server's form: base64url (no padding) of
 * {"v":"meta.k8s.io/v1","rv":N,"start":"<key after the prefix>\u0000"},
 * the key prefix being "namespace/" for a namespaced list and "" for all
 * namespaces.
 *
 * Pure apart from the store it reads and the snapshots it adds; runs on the
 * server's event loop.
 */
#ifndef KVI_KUBEAPI_KUBE_LIST_H
#define KVI_KUBEAPI_KUBE_LIST_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "kube_selector.h"
#include "kube_store.h"

typedef struct kube_list_query {
	const char *ns;              /* NULL: all namespaces */
	const kube_selector *labels; /* NULL: everything */
	const kube_selector *fields; /* NULL: everything */
	uint64_t limit;              /* 0: no limit */
	const char *cont;            /* continue token, NULL for a first page */
} kube_list_query;

/* kube_list_page writes the PodList page for q into *out (a new value).
 * Returns KVI_EPROTO for a malformed continue token (a 400, message in
 * err) and KVI_ENOENT when the token's snapshot is gone (a 410 Expired). */
kvi_err kube_list_page(kube_store *s, const kube_list_query *q, json_t **out,
		       char *err, size_t errlen);

/* kube_list_matches returns whether pod is in namespace ns (NULL: any) and
 * matches both selectors (NULL: everything). */
bool kube_list_matches(const json_t *pod, const char *ns,
		       const kube_selector *labels,
		       const kube_selector *fields);

/* kube_continue_encode returns a new token (kvi_free) for rv and start. */
char *kube_continue_encode(uint64_t rv, const char *start);

/* kube_continue_decode reads rv and start (a new string without the
 * trailing NUL, kvi_free) from token. Returns KVI_EPROTO. */
kvi_err kube_continue_decode(const char *token, uint64_t *rv, char **start);

#endif /* KVI_KUBEAPI_KUBE_LIST_H */
