/*
 * registry_match.c - whether a model's queries match what its listeners
 * hold: the silent fallback, named.
 *
 * When routers and engines disagree on how a prompt is hashed - another
 * hash seed, block size or tokenizer - the index fills with the engines'
 * blocks while no query ever matches one, and routers quietly route by
 * load alone. Each answered query notes whether any listener matched
 * exactly (kvc_model_note, under the lock that names the answer's pods);
 * each assigner tick checks every model
 * (kvc_reg_models_check): one whose listeners hold blocks while its
 * queries, at least KVC_UNMATCHED_QUERIES of them, matched nothing for
 * the whole window is marked unmatched - in the log once, in /metrics and
 * on each of its instances in /workers - until a query matches again.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "registry_int.h"

void
kvc_model_note(kvc_registry *r, const char *model, bool matched, int64_t now_ms)
{
	kvc_model *m = kvc_model_find(r, model);
	if (m != NULL && matched) {
		m->unmatched = 0;
		m->unmatched_since_ms = 0;
	} else if (m != NULL && m->unmatched++ == 0) {
		m->unmatched_since_ms = now_ms;
	}
}

size_t
kvc_reg_models_check(kvc_registry *r, int64_t now_ms, int64_t window_ms)
{
	size_t flagged = 0;
	pthread_mutex_lock(&r->mu);
	/* what each model's listeners hold, as their owners last said: one
	 * pass over the instances */
	for (kvc_model *m = r->models; m != NULL; m = m->next) {
		m->held = 0;
	}
	for (kvc_inst *i = r->insts; i != NULL; i = i->next) {
		kvc_model *m = kvc_model_find(r, i->model);
		for (size_t k = 0; m != NULL && k < i->n_lis; k++) {
			m->held += i->lis[k]->st.blocks;
		}
	}
	for (kvc_model *m = r->models; m != NULL; m = m->next) {
		uint64_t blocks = m->held;
		bool unmatched = window_ms > 0 && blocks > 0 &&
				 m->unmatched >= KVC_UNMATCHED_QUERIES &&
				 now_ms - m->unmatched_since_ms >= window_ms;
		if (unmatched && !m->flagged) {
			KVI_WARN("model_unmatched",
				 "model=%s queries=%" PRIu64 " seconds=%.0f "
				 "blocks=%" PRIu64
				 " reason=\"its listeners hold blocks and none "
				 "of its queries matched one: do routers and "
				 "engines hash prompts alike (hash seed, block "
				 "size, tokenizer)?\"",
				 m->name, m->unmatched,
				 (double)(now_ms - m->unmatched_since_ms) / 1e3,
				 blocks);
		} else if (!unmatched && m->flagged) {
			KVI_INFO("model_matched", "model=%s", m->name);
		}
		m->flagged = unmatched;
		flagged += unmatched;
	}
	pthread_mutex_unlock(&r->mu);
	return flagged;
}

json_t *
kvc_model_unmatched_json(const kvc_model *m, int64_t now_ms)
{
	if (m == NULL || !m->flagged) {
		return json_null();
	}
	return json_pack("{s:I, s:I, s:I}", "queries", (json_int_t)m->unmatched,
			 "seconds",
			 (json_int_t)((now_ms - m->unmatched_since_ms) / 1000),
			 "blocks", (json_int_t)m->held);
}
