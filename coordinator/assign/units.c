/*
 * units.c - the assigner's calls to the shards: batches of assigns and
 * unassigns run in parallel (kvc_run_ops), and registration units
 * assigned all or nothing, many at once (kvc_units_attempt), with the
 * retry backoff of those that could not be.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "assigner_int.h"
#include "log.h"

/* ---- batches of assigns and unassigns ------------------------------ */

bool
kvc_leading(kvc_assigner *a, uint64_t *term)
{
	*term = 0;
	return a->lease == NULL || kvc_lease_leading(a->lease, term);
}

/* not_leading answers a batch that a coordinator no longer leading must
 * not send. */
static void
not_leading(size_t n, bool *ok, bool *existed, char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		if (ok != NULL) {
			ok[i] = false;
		}
		if (existed != NULL) {
			existed[i] = false;
		}
	}
	if (err != NULL && errlen > 0) {
		snprintf(err, errlen, "this coordinator no longer leads");
	}
}

/* send_op starts op's call on f under term; *rec receives the HTTP
 * registration record an assign carries (the caller frees it once the
 * call is sent). */
static void
send_op(kvc_assigner *a, kvc_fanout *f, const kvc_op *op, uint64_t term,
	uint8_t **rec)
{
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.has_term = term > 0;
	req.term = term;
	Kvindex__AssignRequest ar = KVINDEX__ASSIGN_REQUEST__INIT;
	Kvindex__UnassignRequest ur = KVINDEX__UNASSIGN_REQUEST__INIT;
	Kvindex__Listener spec;
	if (op->assign) {
		kvc_spec_fill(&spec, op->lv);
		size_t rlen = 0;
		*rec = kvc_reg_http_record(a->reg, op->lv->r.key, &rlen);
		spec.has_registration = *rec != NULL;
		spec.registration.data = *rec;
		spec.registration.len = rlen;
		ar.listener = &spec;
		if (op->handoff) {
			ar.handoff_from = a->poll.snap[op->from]->url;
		}
		req.body_case = KVINDEX__REQUEST__BODY_ASSIGN;
		req.assign = &ar;
	} else {
		ur.key = op->key;
		req.body_case = KVINDEX__REQUEST__BODY_UNASSIGN;
		req.unassign = &ur;
	}
	kvc_fanout_start(f, a->poll.snap[op->shard]->client, &req,
			 a->cfg.rpc_timeout_ms, NULL);
}

/* op_done takes the outcome of op's call c: counted, logged, and on a
 * failure written into op->err and, for the batch's first, into err.
 * Returns whether it succeeded; *existed says whether the shard already
 * had the listener. */
static bool
op_done(kvc_assigner *a, kvc_op *op, const kvc_call *c, bool first_failure,
	bool *existed, char *err, size_t errlen)
{
	const char *key = op->assign ? op->lv->r.key : op->key;
	/* unassigning what a shard no longer has is done */
	bool good = c->rv == KVI_OK || (!op->assign && c->rv == KVI_ENOENT);
	*existed = good && c->resp != NULL &&
		   c->resp->body_case == KVINDEX__RESPONSE__BODY_ASSIGN &&
		   c->resp->assign->existed;
	if (op->assign) {
		kvi_counter_inc(good ? a->m.assign_ok : a->m.assign_failed);
	} else {
		kvi_counter_inc(good ? a->m.unassign_ok : a->m.unassign_failed);
	}
	if (good) {
		KVI_INFO(op->assign ? "assigned" : "unassigned",
			 "listener=%s shard=%s", key, a->poll.ids[op->shard]);
		return true;
	}
	const char *why = c->err[0] ? c->err : kvi_strerror(c->rv);
	snprintf(op->err, sizeof(op->err), "%.120s", why);
	KVI_WARN(op->assign ? "assign_failed" : "unassign_failed",
		 "listener=%s shard=%s err=%s: %s", key, a->poll.ids[op->shard],
		 kvi_strerror(c->rv), c->err);
	if (first_failure && err != NULL) {
		snprintf(
		    err, errlen, "shard %s %s %s: %s", a->poll.ids[op->shard],
		    op->assign ? "did not take" : "did not drop", key, why);
	}
	return false;
}

void
kvc_run_ops(kvc_assigner *a, kvc_op *ops, size_t n, bool *ok, bool *existed,
	    char *err, size_t errlen)
{
	size_t chunk = (size_t)a->cfg.max_in_flight;
	bool failed = false;
	uint64_t term;
	if (!kvc_leading(a, &term)) {
		not_leading(n, ok, existed, err, errlen);
		return;
	}
	for (size_t base = 0; base < n; base += chunk) {
		size_t end = base + chunk < n ? base + chunk : n;
		kvc_fanout f;
		kvc_fanout_init(&f);
		for (size_t i = base; i < end; i++) {
			uint8_t *rec = NULL;
			send_op(a, &f, &ops[i], term, &rec);
			kvi_free(rec);
		}
		kvc_fanout_wait(&f);
		for (size_t i = base; i < end; i++) {
			bool had;
			bool good = op_done(a, &ops[i], &f.calls[i - base],
					    !failed, &had, err, errlen);
			failed = failed || !good;
			if (ok != NULL) {
				ok[i] = good;
			}
			if (existed != NULL) {
				existed[i] = had;
			}
		}
		kvc_fanout_fini(&f);
	}
}

/* ---- registration units -------------------------------------------- */

const char *
kvc_unit_of(const kvc_lview *lv)
{
	return lv->pod != NULL && lv->pod[0] != '\0' ? lv->pod : lv->r.key;
}

kvc_retry *
kvc_retry_get(kvc_assigner *a, const char *unit, bool create)
{
	for (size_t i = 0; i < a->retries.n; i++) {
		if (strcmp(a->retries.v[i].unit, unit) == 0) {
			return &a->retries.v[i];
		}
	}
	if (!create) {
		return NULL;
	}
	a->retries.v = kvi_reallocarray(a->retries.v, a->retries.n + 1,
					sizeof(*a->retries.v));
	kvc_retry *r = &a->retries.v[a->retries.n++];
	memset(r, 0, sizeof(*r));
	r->unit = kvi_strdup(unit);
	return r;
}

void
kvc_retry_fail(kvc_assigner *a, const char *unit, const char *err)
{
	kvc_retry *r = kvc_retry_get(a, unit, true);
	r->backoff_ms =
	    r->backoff_ms == 0 ? a->cfg.retry_min_ms : r->backoff_ms * 2;
	if (r->backoff_ms > a->cfg.retry_max_ms) {
		r->backoff_ms = a->cfg.retry_max_ms;
	}
	r->next_ms = kvi_now_ms() + r->backoff_ms;
	snprintf(r->err, sizeof(r->err), "%s", err);
	kvi_counter_inc(a->m.reg_retries);
}

void
kvc_retry_clear(kvc_assigner *a, const char *unit)
{
	for (size_t i = 0; i < a->retries.n; i++) {
		if (strcmp(a->retries.v[i].unit, unit) == 0) {
			kvi_free(a->retries.v[i].unit);
			a->retries.v[i] = a->retries.v[--a->retries.n];
			return;
		}
	}
}

bool
kvc_retry_due(kvc_assigner *a, const char *unit, int64_t now)
{
	kvc_retry *r = kvc_retry_get(a, unit, false);
	return r == NULL || now >= r->next_ms;
}

void
kvc_units_attempt(kvc_assigner *a, const kvc_lview *const *lvs,
		  const size_t *first, size_t n_units, bool *good,
		  char (*why)[256])
{
	size_t total = first[n_units];
	kvc_op *ops = kvi_calloc(total + 1, sizeof(*ops));
	size_t *unit = kvi_calloc(total + 1, sizeof(*unit));
	size_t m = 0;
	for (size_t u = 0; u < n_units; u++) {
		good[u] = true;
		why[u][0] = '\0';
		size_t start = m;
		for (size_t i = first[u]; i < first[u + 1] && good[u]; i++) {
			const char *key = lvs[i]->r.key;
			size_t d =
			    kvc_rdv_assign(a->pins, a->poll.ids, a->poll.n,
					   a->poll.eligible, key, NULL);
			if (d == KVC_RDV_NONE) {
				snprintf(why[u], sizeof(why[u]),
					 "no shard can take %s: %s", key,
					 a->poll.n
					     ? "every shard is down or "
					       "draining"
					     : "no shards are configured");
				good[u] = false;
			} else if (!a->poll.answered[d]) {
				snprintf(why[u], sizeof(why[u]),
					 "shard %s, which owns %s, is not "
					 "answering",
					 a->poll.ids[d], key);
				good[u] = false;
			} else {
				ops[m] = (kvc_op){
				    .assign = true, .shard = d, .lv = lvs[i]};
				unit[m++] = u;
			}
		}
		if (!good[u]) {
			m = start; /* nothing of it is asked for */
		}
	}
	/* one round of calls for every unit, max_in_flight at a time */
	bool *ok = kvi_calloc(m + 1, sizeof(bool));
	bool *existed = kvi_calloc(m + 1, sizeof(bool));
	kvc_run_ops(a, ops, m, ok, existed, NULL, 0);
	for (size_t k = 0; k < m; k++) {
		size_t u = unit[k];
		if (!ok[k] && good[u]) {
			good[u] = false;
			snprintf(why[u], sizeof(why[u]),
				 "shard %s did not take %s%s%s",
				 a->poll.ids[ops[k].shard], ops[k].lv->r.key,
				 ops[k].err[0] ? ": " : "", ops[k].err);
		}
	}
	/* all or nothing: what a failed unit did get assigned is taken back */
	kvc_op *undo = kvi_calloc(m + 1, sizeof(*undo));
	size_t n_undo = 0;
	for (size_t k = 0; k < m; k++) {
		const char *key = ops[k].lv->r.key;
		if (good[unit[k]]) {
			kvc_reg_set_owner(a->reg, key,
					  a->poll.ids[ops[k].shard], NULL);
		} else if (ok[k] && !existed[k]) {
			undo[n_undo++] = (kvc_op){.assign = false,
						  .shard = ops[k].shard,
						  .key = (char *)key};
		}
	}
	kvc_run_ops(a, undo, n_undo, NULL, NULL, NULL, 0);
	kvi_free(undo);
	kvi_free(ok);
	kvi_free(existed);
	kvi_free(unit);
	kvi_free(ops);
}

size_t
kvc_units_retry(kvc_assigner *a, const kvc_lview *const *lvs,
		const size_t *first, const char *const *names, size_t n_units)
{
	bool *good = kvi_calloc(n_units + 1, sizeof(bool));
	char(*why)[256] = kvi_calloc(n_units + 1, sizeof(*why));
	kvc_units_attempt(a, lvs, first, n_units, good, why);
	size_t failed = 0;
	for (size_t u = 0; u < n_units; u++) {
		if (good[u]) {
			kvc_retry_clear(a, names[u]);
		} else {
			KVI_WARN("register_retry", "unit=%s err=%s", names[u],
				 why[u]);
			kvc_retry_fail(a, names[u], why[u]);
			failed++;
		}
	}
	kvi_free(why);
	kvi_free(good);
	return failed;
}

bool
kvc_unit_attempt(kvc_assigner *a, const kvc_lview *const *lvs, size_t n,
		 char *err, size_t errlen)
{
	size_t first[2] = {0, n};
	bool good;
	char why[1][256];
	kvc_units_attempt(a, lvs, first, 1, &good, why);
	snprintf(err, errlen, "%s", why[0]);
	return good;
}
