/*
 * sim_groups_spec.c - what a model's KV cache groups are (sim_groups.h):
 * the --kv-groups syntax, vLLM's names of the kinds, and what the groups
 * allow.
 */
#include <string.h>

#include "sim_groups.h"

#define MAX_NUMBER (1u << 30)

/* A kind's names: ours, then vLLM's kv_cache_spec_kind. */
static const struct {
	const char *name;
	const char *vllm;
	sim_group_kind kind;
	bool arg; /* takes =N (or =all|align for Mamba) */
} kinds[] = {
    {"full", "full_attention", SIM_GROUP_FULL, false},
    {"mla", "mla_attention", SIM_GROUP_MLA, false},
    {"swa", "sliding_window", SIM_GROUP_SLIDING, true},
    {"swa-mla", "sliding_window_mla", SIM_GROUP_SLIDING_MLA, true},
    {"chunked", "chunked_local_attention", SIM_GROUP_CHUNKED_LOCAL, true},
    {"mamba", "mamba", SIM_GROUP_MAMBA, true},
};
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))

const char *
sim_group_kind_name(sim_group_kind kind)
{
	for (size_t i = 0; i < N_KINDS; i++) {
		if (kinds[i].kind == kind) {
			return kinds[i].vllm;
		}
	}
	return "unknown";
}

uint32_t
sim_group_window(const sim_group_spec *spec)
{
	return spec->kind == SIM_GROUP_SLIDING ||
		       spec->kind == SIM_GROUP_SLIDING_MLA
		   ? spec->sliding_window
		   : 0;
}

bool
sim_groups_keys_ok(const sim_groups_config *cfg)
{
	for (size_t i = 0; i < cfg->n_groups; i++) {
		if (cfg->groups[i].spec.block_size != cfg->hash_block_size) {
			return false;
		}
	}
	return true;
}

uint32_t
sim_groups_step_align(const sim_groups_config *cfg)
{
	for (size_t i = 0; i < cfg->n_groups; i++) {
		const sim_group_spec *s = &cfg->groups[i].spec;
		if (s->kind == SIM_GROUP_MAMBA &&
		    s->mamba_mode == SIM_MAMBA_ALIGN) {
			return s->block_size;
		}
	}
	return 0;
}

/* number parses a whole run of len decimal digits in [1, MAX_NUMBER]. */
static bool
number(const char *s, size_t len, uint32_t *out)
{
	uint64_t v = 0;
	if (len == 0 || len > 10) {
		return false;
	}
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9') {
			return false;
		}
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v == 0 || v > MAX_NUMBER) {
		return false;
	}
	*out = (uint32_t)v;
	return true;
}

static bool
word_is(const char *s, size_t len, const char *w)
{
	return strlen(w) == len && memcmp(s, w, len) == 0;
}

/* parse_arg reads a kind's =ARG into the spec. */
static const char *
parse_arg(const char *a, size_t len, sim_group_spec *spec)
{
	switch (spec->kind) {
	case SIM_GROUP_SLIDING:
	case SIM_GROUP_SLIDING_MLA:
		return number(a, len, &spec->sliding_window)
			   ? NULL
			   : "a sliding window needs =TOKENS";
	case SIM_GROUP_CHUNKED_LOCAL:
		return number(a, len, &spec->chunk_size)
			   ? NULL
			   : "chunked local attention needs =CHUNK_TOKENS";
	case SIM_GROUP_MAMBA:
		if (word_is(a, len, "all")) {
			spec->mamba_mode = SIM_MAMBA_ALL;
		} else if (word_is(a, len, "align")) {
			spec->mamba_mode = SIM_MAMBA_ALIGN;
		} else {
			return "mamba needs =all or =align";
		}
		return NULL;
	default:
		return "this kind takes no =ARG";
	}
}

/* parse_kind reads KIND[=ARG] (len bytes) into the spec. */
static const char *
parse_kind(const char *s, size_t len, sim_group_spec *spec)
{
	const char *eq = memchr(s, '=', len);
	size_t name_len = eq ? (size_t)(eq - s) : len;
	for (size_t i = 0; i < N_KINDS; i++) {
		if (!word_is(s, name_len, kinds[i].name) &&
		    !word_is(s, name_len, kinds[i].vllm)) {
			continue;
		}
		spec->kind = kinds[i].kind;
		if (!kinds[i].arg) {
			return eq ? "full and mla take no =ARG" : NULL;
		}
		if (eq == NULL) {
			return "swa, swa-mla, chunked and mamba need =ARG";
		}
		return parse_arg(eq + 1, len - name_len - 1, spec);
	}
	return "unknown group kind (full, mla, swa=W, swa-mla=W, "
	       "chunked=C, mamba=all|align)";
}

/* parse_group reads KIND[:BLOCK_SIZE[:BLOCKS]] (len bytes). */
static const char *
parse_group(const char *s, size_t len, uint32_t hash_bs, uint32_t blocks,
	    sim_group_config *g)
{
	memset(g, 0, sizeof(*g));
	g->spec.block_size = hash_bs;
	g->blocks = blocks;
	const char *c1 = memchr(s, ':', len);
	size_t kind_len = c1 ? (size_t)(c1 - s) : len;
	const char *why = parse_kind(s, kind_len, &g->spec);
	if (why != NULL || c1 == NULL) {
		return why;
	}
	const char *bs = c1 + 1;
	size_t rest = len - kind_len - 1;
	const char *c2 = memchr(bs, ':', rest);
	size_t bs_len = c2 ? (size_t)(c2 - bs) : rest;
	if (!number(bs, bs_len, &g->spec.block_size) ||
	    g->spec.block_size % hash_bs != 0) {
		return "a group's block size must be a multiple of "
		       "--block-size";
	}
	if (c2 != NULL && !number(c2 + 1, rest - bs_len - 1, &g->blocks)) {
		return "a group's blocks must be a positive number";
	}
	if (g->spec.kind == SIM_GROUP_MAMBA &&
	    g->spec.mamba_mode == SIM_MAMBA_ALIGN && g->blocks < 2) {
		/* the state a request hit and the one it stores */
		return "mamba=align needs 2 blocks at least";
	}
	return NULL;
}

const char *
sim_groups_parse(const char *s, size_t len, uint32_t hash_bs, uint32_t blocks,
		 sim_groups_config *out)
{
	memset(out, 0, sizeof(*out));
	out->hash_block_size = hash_bs;
	if (hash_bs == 0 || blocks == 0) {
		return "the hash block size and blocks must be positive";
	}
	for (;;) {
		const char *comma = memchr(s, ',', len);
		size_t n = comma ? (size_t)(comma - s) : len;
		if (out->n_groups == SIM_MAX_GROUPS) {
			return "at most 16 groups";
		}
		const char *why = parse_group(s, n, hash_bs, blocks,
					      &out->groups[out->n_groups++]);
		if (why != NULL) {
			return why;
		}
		if (comma == NULL) {
			break;
		}
		s = comma + 1;
		len -= n + 1;
	}
	sim_group_spec specs[SIM_MAX_GROUPS];
	for (size_t i = 0; i < out->n_groups; i++) {
		specs[i] = out->groups[i].spec;
	}
	return sim_hybrid_check(specs, out->n_groups);
}
