#include "sim_sched.h"

#include <string.h>

#include "alloc.h"

sim_job *
sim_job_alloc(uint32_t *tokens, uint32_t n_blocks, uint64_t n_tokens,
	      const kvi_prompt_keys *keys)
{
	sim_job *j = kvi_calloc(1, sizeof(*j));
	j->tokens = tokens;
	j->n_blocks = n_blocks;
	j->n_tokens = n_tokens;
	j->seq = -1;
	if (keys == NULL) {
		return j;
	}
	size_t text = keys->lora_len + keys->salt_len + 2;
	for (size_t i = 0; i < keys->n_mm; i++) {
		text += keys->mm[i].id_len + 1;
	}
	j->text = kvi_malloc(text);
	j->mm = kvi_calloc(keys->n_mm + 1, sizeof(*j->mm));
	char *p = j->text;
	j->keys = *keys;
	if (keys->lora_len > 0) {
		memcpy(p, keys->lora_name, keys->lora_len);
		j->keys.lora_name = p;
		p += keys->lora_len;
		*p++ = '\0';
	}
	if (keys->salt_len > 0) {
		memcpy(p, keys->cache_salt, keys->salt_len);
		j->keys.cache_salt = p;
		p += keys->salt_len;
		*p++ = '\0';
	}
	for (size_t i = 0; i < keys->n_mm; i++) {
		j->mm[i] = keys->mm[i];
		memcpy(p, keys->mm[i].id, keys->mm[i].id_len);
		j->mm[i].id = p;
		p += keys->mm[i].id_len;
		*p++ = '\0';
	}
	j->keys.mm = j->mm;
	j->has_keys = true;
	return j;
}

void
sim_job_free(sim_job *j)
{
	if (j == NULL) {
		return;
	}
	kvi_free(j->tokens);
	kvi_free(j->text);
	kvi_free(j->mm);
	kvi_free(j->local_hashes);
	kvi_free(j);
}

void
sim_sched_init(sim_sched *s, const sim_sched_config *cfg)
{
	memset(s, 0, sizeof(*s));
	s->cfg = *cfg;
	sim_batch_init(&s->scratch, cfg->block_size);
}

void
sim_sched_fini(sim_sched *s)
{
	for (sim_job *j = sim_sched_drain(s); j != NULL;) {
		sim_job *next = j->next;
		sim_job_free(j);
		j = next;
	}
	sim_batch_fini(&s->scratch);
}

bool
sim_sched_push(sim_sched *s, sim_job *j, uint64_t now_ns, uint32_t *ahead)
{
	if (s->queued >= s->cfg.max_queue) {
		return false;
	}
	*ahead = s->queued + (s->cur != NULL ? 1 : 0);
	j->arrival_ns = now_ns;
	j->next = NULL;
	if (s->tail != NULL) {
		s->tail->next = j;
	} else {
		s->head = j;
	}
	s->tail = j;
	s->queued++;
	return true;
}

/* duration_ns is how long computing tokens takes at the rate. */
static uint64_t
duration_ns(const sim_sched *s, uint64_t tokens)
{
	double d = (double)tokens * 1e9 / s->cfg.rate;
	uint64_t ns = (uint64_t)d;
	return (double)ns < d ? ns + 1 : ns;
}

/* step_end returns the end of the step that computes up to token `to`. */
static uint64_t
step_end(const sim_sched *s, const sim_job *j, uint64_t to)
{
	return j->start_ns + duration_ns(s, to - j->hit_tokens);
}

/* align_stop cuts a step [done, to) of j as vLLM's
 * Scheduler._mamba_block_aligned_split does in "align" mode: before the
 * prompt's last block boundary a step ends on a boundary (at least one
 * block: this simulator always makes progress); one that would pass it
 * ends there. */
static uint64_t
align_stop(const sim_sched *s, const sim_job *j, uint64_t to)
{
	uint64_t bs = s->cfg.align;
	uint64_t last = j->n_tokens - j->n_tokens % bs;
	if (to < last) {
		uint64_t n = (to - j->done_tokens) / bs * bs;
		return j->done_tokens + (n > 0 ? n : bs);
	}
	if (j->done_tokens < last && last < to) {
		return last;
	}
	return to;
}

/* next_stop returns the token the current step of j computes up to. */
static uint64_t
next_stop(const sim_sched *s, const sim_job *j)
{
	uint64_t left = j->n_tokens - j->done_tokens;
	uint64_t to = s->cfg.chunk == 0 || left <= s->cfg.chunk
			  ? j->n_tokens
			  : j->done_tokens + s->cfg.chunk;
	return s->cfg.align > 0 ? align_stop(s, j, to) : to;
}

/* take_next makes the head of the queue the running request, if nothing
 * runs. */
static sim_job *
take_next(sim_sched *s)
{
	if (s->cur != NULL || s->head == NULL) {
		return NULL;
	}
	sim_job *j = s->head;
	s->head = j->next;
	if (s->head == NULL) {
		s->tail = NULL;
	}
	s->queued--;
	j->next = NULL;
	s->cur = j;
	j->start_ns = j->arrival_ns > s->clock_ns ? j->arrival_ns : s->clock_ns;
	return j;
}

/* begin_job starts j with its hit: every block's local hash (from the
 * scratch batch), the schedule of its steps. */
static void
begin_job(sim_sched *s, sim_job *j, uint64_t hit_tokens)
{
	uint32_t bs = s->cfg.block_size;
	j->n_local = s->scratch.n_blocks;
	j->local_hashes = kvi_malloc((j->n_local + 1) * sizeof(uint64_t));
	memcpy(j->local_hashes, s->scratch.local,
	       j->n_local * sizeof(uint64_t));
	j->hit_blocks = (uint32_t)(hit_tokens / bs);
	j->hit_tokens = hit_tokens;
	j->done_tokens = hit_tokens;
	j->prev_tokens = hit_tokens;
	j->done_blocks = j->hit_blocks;
	j->end_ns = step_end(s, j, j->n_tokens);
	s->step_end_ns = step_end(s, j, next_stop(s, j));
}

sim_job *
sim_sched_start(sim_sched *s, sim_cache *c)
{
	sim_job *j = take_next(s);
	if (j == NULL) {
		return NULL;
	}
	/* The cached prefix capped as vLLM caps it: at least the last
	 * token is computed. */
	uint32_t bs = s->cfg.block_size;
	sim_batch_reset(&s->scratch);
	uint32_t cached =
	    sim_cache_hit(c, &s->scratch, j->tokens, j->n_blocks,
			  j->has_keys ? &j->keys : NULL, UINT32_MAX);
	uint64_t cap = j->n_tokens > 0 ? (j->n_tokens - 1) / bs : 0;
	begin_job(s, j, (cached < cap ? cached : cap) * bs);
	return j;
}

sim_job *
sim_sched_start_groups(sim_sched *s, sim_groups *g)
{
	sim_job *j = take_next(s);
	if (j == NULL) {
		return NULL;
	}
	sim_batch_reset(&s->scratch);
	begin_job(s, j,
		  sim_groups_hit(g, &s->scratch, j->tokens, j->n_tokens,
				 j->has_keys ? &j->keys : NULL));
	return j;
}

uint64_t
sim_sched_due(const sim_sched *s)
{
	return s->cur != NULL ? s->step_end_ns : UINT64_MAX;
}

uint64_t
sim_sched_busy_until(const sim_sched *s)
{
	return s->cur != NULL ? s->cur->end_ns : 0;
}

/* end_step records that the current step of j computed up to `to` and
 * returns j if that ended it. */
static sim_job *
end_step(sim_sched *s, sim_job *j, uint64_t to)
{
	j->prev_tokens = j->done_tokens;
	j->done_tokens = to;
	if (to < j->n_tokens) {
		s->step_end_ns = step_end(s, j, next_stop(s, j));
		return NULL;
	}
	s->clock_ns = j->end_ns;
	s->cur = NULL;
	return j;
}

sim_job *
sim_sched_step(sim_sched *s, sim_cache *c, sim_batch *batch)
{
	sim_job *j = s->cur;
	if (j == NULL) {
		return NULL;
	}
	uint64_t to = next_stop(s, j);
	uint64_t full = to / s->cfg.block_size;
	uint32_t to_block = full < j->n_blocks ? (uint32_t)full : j->n_blocks;
	if (to_block > j->done_blocks) {
		sim_request_result res;
		sim_cache_run_span(c, batch, j->tokens, j->n_blocks,
				   j->has_keys ? &j->keys : NULL,
				   j->done_blocks, to_block, &res);
		j->stored += res.stored;
		j->cpu_loaded += res.cpu_loaded;
		j->removed += res.removed;
		j->done_blocks = to_block;
	}
	return end_step(s, j, to);
}

sim_job *
sim_sched_step_groups(sim_sched *s, sim_groups *g, sim_batch *batch)
{
	sim_job *j = s->cur;
	if (j == NULL) {
		return NULL;
	}
	uint64_t to = next_stop(s, j);
	sim_request_result res;
	sim_groups_span(g, batch, j->tokens, j->n_tokens,
			j->has_keys ? &j->keys : NULL, j->prev_tokens,
			j->done_tokens, to, to >= j->n_tokens, &res);
	j->stored += res.stored;
	j->removed += res.removed;
	j->done_blocks = (uint32_t)(to / s->cfg.block_size);
	return end_step(s, j, to);
}

sim_job *
sim_sched_drain(sim_sched *s)
{
	sim_job *list = s->head;
	if (s->cur != NULL) {
		s->cur->next = list;
		list = s->cur;
	}
	s->head = s->tail = s->cur = NULL;
	s->queued = 0;
	return list;
}
