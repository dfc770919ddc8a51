/*
 * ladder_step.c - the ladder's rule for one listener (ladder.h): windows,
 * ratios and gaps. Pure, table-tested.
 */
#include "ladder.h"

static void
fill(kvc_ladder_config *c)
{
	c->gap = c->gap > 0 ? c->gap : 0.25;
	c->min_tokens = c->min_tokens > 0 ? c->min_tokens : 20000;
	c->window_tokens = c->window_tokens > 0 ? c->window_tokens : 2000000;
}

static void
window_start(kvc_lladder *c, uint64_t queries, uint64_t hits,
	     const kvc_lpending *p)
{
	c->queries0 = queries;
	c->hits0 = hits;
	c->prompt0 = p->prompt_tokens;
	c->predicted0 = p->predicted_tokens;
}

kvc_ladder_event
kvc_ladder_step(kvc_lladder *c, uint64_t queries, uint64_t hits,
		const kvc_lpending *p, const kvc_ladder_config *cfg_in)
{
	kvc_ladder_config cfg = *cfg_in;
	fill(&cfg);
	int was = c->gap;
	if (!c->engine_known) {
		*c = (kvc_lladder){.engine_known = true,
				   .engine_ratio = -1,
				   .predicted_ratio = -1};
		window_start(c, queries, hits, p);
	} else if (queries < c->queries0 || hits < c->hits0 ||
		   p->prompt_tokens < c->prompt0 ||
		   p->predicted_tokens < c->predicted0) {
		/* a side started again: what was measured no longer holds */
		window_start(c, queries, hits, p);
		c->engine_ratio = c->predicted_ratio = -1;
		c->gap = 0;
	}
	c->queries = queries;
	c->hits = hits;
	uint64_t dq = queries - c->queries0, dp = p->prompt_tokens - c->prompt0;
	if (dq >= cfg.min_tokens && dp >= cfg.min_tokens) {
		double er = (double)(hits - c->hits0) / (double)dq;
		double pr =
		    (double)(p->predicted_tokens - c->predicted0) / (double)dp;
		c->engine_ratio = er > 1 ? 1 : er;
		c->predicted_ratio = pr > 1 ? 1 : pr;
		c->gap = c->engine_ratio - c->predicted_ratio > cfg.gap
			     ? KVC_GAP_BLIND
			 : c->predicted_ratio - c->engine_ratio > cfg.gap
			     ? KVC_GAP_PHANTOM
			     : 0;
		if (dq >= cfg.window_tokens && dp >= cfg.window_tokens) {
			window_start(c, queries, hits, p);
		}
	}
	if (c->gap == was) {
		return KVC_LADDER_SAME;
	}
	return c->gap != 0 && was == 0 ? KVC_LADDER_GAP_BEGAN
	       : c->gap == 0           ? KVC_LADDER_GAP_ENDED
				       : KVC_LADDER_GAP_BEGAN;
}
