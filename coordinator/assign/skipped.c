/*
 * skipped.c - the pods a discovery source lists that the registry refused
 * (registry.h), on the assigner thread.
 *
 * An HTTP client is answered 409 or 400; a source (the discovery file,
 * Kubernetes) cannot be, so a pod it lists whose endpoint, name or
 * instance id is another's, whose model has another block size, or whose
 * dp_size is over the cap is skipped, and the others are registered. A
 * source gives its whole set at each sync (Kubernetes, at each watch
 * event), so a refusal would be repeated at each: it is logged and
 * counted (kvindex_coord_registrations_refused_total) when it is new - a
 * warning that names the listener keeping the place (pod_skipped), or an
 * error for a block size or a dp_size (pod_rejected) - and at debug
 * level while it lasts.
 *
 * A pod skipped because something registered is in its way is kept, and
 * tried again whenever listeners were removed (kvc_skip_retry): the
 * source lists it again only once something about it changes, and the
 * place it wanted may be free by then.
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "assigner_int.h"
#include "log.h"

void
kvc_refused_count(kvc_assigner *a, kvc_source s, kvc_reg_why why)
{
	if ((unsigned)s < KVC_SOURCES && (unsigned)why < KVC_REG_WHYS) {
		atomic_fetch_add(&a->refusals.count[s][why], 1);
	}
}

/* skip_retryable says whether a pod refused for why may be taken
 * once something else is removed. */
static bool
skip_retryable(kvc_reg_why why)
{
	return why == KVC_REG_KEY || why == KVC_REG_ENDPOINT ||
	       why == KVC_REG_BLOCK_SIZE;
}

/* skip_known says whether the source's last sync skipped p for the
 * same reason, in the way of the same listener. */
static bool
skip_known(const kvc_skips *old, const kvc_pod *p, const kvc_reg_result *res)
{
	for (size_t i = 0; i < old->n; i++) {
		const kvc_skip *k = &old->v[i];
		if (k->why == res->why && strcmp(k->holder, res->holder) == 0 &&
		    kvc_pod_equal(&k->pod, p)) {
			return true;
		}
	}
	return false;
}

void
kvc_skip_note(kvc_assigner *a, kvc_skips *next, const kvc_pod *p,
	      const kvc_reg_result *res, const char *err)
{
	const char *src = kvc_source_name(p->source);
	const char *why = kvc_reg_why_name(res->why);
	const char *name = p->name != NULL ? p->name : "-";
	if (skip_known(&a->refusals.skipped[p->source], p, res)) {
		KVI_DEBUG("pod_skipped", "source=%s pod=%s reason=%s still",
			  src, name, why);
	} else if (res->why == KVC_REG_KEY || res->why == KVC_REG_ENDPOINT) {
		KVI_WARN("pod_skipped",
			 "source=%s pod=%s reason=%s kept_by=%s err=\"%s\"",
			 src, name, why, res->holder, err);
		kvc_refused_count(a, p->source, res->why);
	} else {
		KVI_ERROR("pod_rejected",
			  "source=%s pod=%s reason=%s err=\"%s\"", src, name,
			  why, err);
		kvc_refused_count(a, p->source, res->why);
	}
	if (next->n == next->cap) {
		next->cap = next->cap ? next->cap * 2 : 8;
		next->v =
		    kvi_reallocarray(next->v, next->cap, sizeof(*next->v));
	}
	kvc_skip *k = &next->v[next->n++];
	kvc_pod_copy(&k->pod, p);
	k->why = res->why;
	snprintf(k->holder, sizeof(k->holder), "%s", res->holder);
}

void
kvc_skips_fini(kvc_skips *s)
{
	for (size_t i = 0; i < s->n; i++) {
		kvc_pod_fini(&s->v[i].pod);
	}
	kvi_free(s->v);
	*s = (kvc_skips){0};
}

void
kvc_skip_set(kvc_assigner *a, kvc_source s, kvc_skips *next)
{
	kvc_skips_fini(&a->refusals.skipped[s]);
	a->refusals.skipped[s] = *next;
	*next = (kvc_skips){0};
}

/* skip_retry_source tries again the pods of source s skipped for
 * what was in their way, and assigns those now added. */
static void
skip_retry_source(kvc_assigner *a, kvc_source s)
{
	kvc_skips *sk = &a->refusals.skipped[s];
	kvc_skips added = {0};
	const kvc_pod **fresh = kvi_calloc(sk->n + 1, sizeof(*fresh));
	size_t kept = 0;
	for (size_t i = 0; i < sk->n; i++) {
		kvc_skip *k = &sk->v[i];
		char err[512];
		kvc_reg_result res;
		if (skip_retryable(k->why) &&
		    kvc_reg_add(a->reg, &k->pod, &res, err, sizeof(err)) ==
			KVI_OK) {
			KVI_INFO("pod_added", "source=%s pod=%s was=skipped",
				 kvc_source_name(s),
				 k->pod.name != NULL ? k->pod.name : "-");
			added.v = kvi_reallocarray(added.v, added.n + 1,
						   sizeof(*added.v));
			added.v[added.n++] = *k;
			continue;
		}
		sk->v[kept++] = *k;
	}
	sk->n = kept;
	for (size_t i = 0; i < added.n; i++) {
		fresh[i] = &added.v[i].pod;
	}
	kvc_sync_assign(a, fresh, added.n);
	kvi_free(fresh);
	kvc_skips_fini(&added);
}

void
kvc_skip_retry(kvc_assigner *a)
{
	if (a->removed_total == a->refusals.retried_at) {
		return;
	}
	a->refusals.retried_at = a->removed_total;
	for (int s = 0; s < KVC_SOURCES; s++) {
		if (a->refusals.skipped[s].n > 0) {
			skip_retry_source(a, (kvc_source)s);
		}
	}
}
