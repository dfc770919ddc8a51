#include "sim_load.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"

/* Synthetic workload shape. */
#define GEN_SYSTEM_PROMPTS 8
#define GEN_SYSTEM_MIN     4 /* ids */
#define GEN_SYSTEM_MAX     32
#define GEN_SUFFIX_MAX     24
#define GEN_FOLLOWUP_PCT   25 /* percent of requests that extend a turn */
#define GEN_TURN_MAX       4  /* ids added by a follow-up */
#define GEN_POOL           64 /* recent prompts a follow-up may extend */
#define GEN_MAX_IDS        512
#define GEN_SYSTEM_BASE    (UINT64_C(1) << 40)
#define GEN_FRESH_BASE     (UINT64_C(1) << 41)

typedef struct gen_prompt {
	uint64_t ids[GEN_MAX_IDS];
	uint32_t n;
	uint64_t tenant; /* draws the salt and LoRA: kept by follow-ups */
} gen_prompt;

struct sim_load {
	sim_load_config cfg;
	/* trace: line i has ids[offsets[i] .. offsets[i + 1]) */
	uint64_t *ids;
	size_t *offsets;
	size_t n_lines;
	uint64_t id_span; /* max id + 1: the offset between copies */
	/* generator */
	uint64_t rng;
	uint64_t fresh;
	uint32_t system_len[GEN_SYSTEM_PROMPTS];
	gen_prompt *pool;
	uint32_t pool_n;
	gen_prompt scratch;
	/* progress */
	uint64_t per_pass;
	uint64_t done;
	uint64_t total;
	uint32_t *tokens;
	size_t cap_tokens;
	/* keys of the last request */
	kvi_prompt_keys keys;
	kvi_mm_item image;
	char salt[24], lora[24], image_id[24];
};

static uint64_t
splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

static uint32_t
rng_below(sim_load *l, uint32_t n)
{
	return (uint32_t)(splitmix64(&l->rng) % n);
}

void
sim_load_block_tokens(uint64_t id, uint32_t j, uint32_t bs, uint32_t *out)
{
	uint64_t state =
	    id * 0xd6e8feb86659fd93u ^ (uint64_t)j << 40 ^ 0x6b76696e64657873u;
	for (uint32_t i = 0; i < bs; i++) {
		out[i] = (uint32_t)(splitmix64(&state) % SIM_VOCAB);
	}
}

static void
expand_into(const uint64_t *ids, size_t n, uint64_t offset, uint32_t k,
	    uint32_t bs, uint32_t *out)
{
	for (size_t i = 0; i < n; i++) {
		for (uint32_t j = 0; j < k; j++) {
			sim_load_block_tokens(ids[i] + offset, j, bs, out);
			out += bs;
		}
	}
}

uint32_t *
sim_load_expand(const uint64_t *ids, size_t n, uint32_t blocks_per_id,
		uint32_t bs, uint32_t *n_blocks)
{
	size_t blocks = n * blocks_per_id;
	uint32_t *out = kvi_malloc(blocks * bs * sizeof(uint32_t));
	expand_into(ids, n, 0, blocks_per_id, bs, out);
	*n_blocks = (uint32_t)blocks;
	return out;
}

kvi_err
sim_trace_parse_line(const char *line, size_t len, uint64_t **ids, size_t *n)
{
	json_error_t jerr;
	json_t *root = json_loadb(line, len, 0, &jerr);
	json_t *arr =
	    json_is_object(root) ? json_object_get(root, "hash_ids") : NULL;
	if (!json_is_array(arr)) {
		json_decref(root);
		return KVI_EPROTO;
	}
	size_t count = json_array_size(arr);
	uint64_t *out = kvi_malloc((count ? count : 1) * sizeof(uint64_t));
	for (size_t i = 0; i < count; i++) {
		json_t *v = json_array_get(arr, i);
		if (!json_is_integer(v) || json_integer_value(v) < 0) {
			kvi_free(out);
			json_decref(root);
			return KVI_EPROTO;
		}
		out[i] = (uint64_t)json_integer_value(v);
	}
	json_decref(root);
	*ids = out;
	*n = count;
	return KVI_OK;
}

static void
trace_append(sim_load *l, const uint64_t *ids, size_t n, size_t *cap_ids,
	     size_t *cap_lines)
{
	if (l->n_lines + 2 > *cap_lines) {
		*cap_lines = *cap_lines ? *cap_lines * 2 : 1024;
		l->offsets =
		    kvi_reallocarray(l->offsets, *cap_lines, sizeof(size_t));
	}
	size_t used = l->offsets[l->n_lines];
	while (used + n > *cap_ids) {
		*cap_ids = *cap_ids ? *cap_ids * 2 : 16384;
		l->ids = kvi_reallocarray(l->ids, *cap_ids, sizeof(uint64_t));
	}
	for (size_t i = 0; i < n; i++) {
		l->ids[used + i] = ids[i];
		if (ids[i] + 1 > l->id_span) {
			l->id_span = ids[i] + 1;
		}
	}
	l->offsets[++l->n_lines] = used + n;
}

static kvi_err
trace_read(sim_load *l, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return errno == ENOENT ? KVI_ENOENT : KVI_EIO;
	}
	size_t cap_ids = 0, cap_lines = 1024, lineno = 0;
	l->offsets = kvi_calloc(cap_lines, sizeof(size_t));
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	kvi_err rv = KVI_OK;
	while ((len = getline(&line, &cap, f)) >= 0) {
		lineno++;
		if (strspn(line, " \t\r\n") == (size_t)len) {
			continue;
		}
		uint64_t *ids;
		size_t n;
		if (sim_trace_parse_line(line, (size_t)len, &ids, &n) !=
		    KVI_OK) {
			snprintf(err, errlen, "%s:%zu: no valid hash_ids", path,
				 lineno);
			rv = KVI_EPROTO;
			break;
		}
		trace_append(l, ids, n, &cap_ids, &cap_lines);
		kvi_free(ids);
	}
	free(line); /* allocated by getline */
	fclose(f);
	if (rv == KVI_OK && l->n_lines == 0) {
		snprintf(err, errlen, "%s: no requests", path);
		rv = KVI_EINVAL;
	}
	return rv;
}

static void
gen_reset(sim_load *l)
{
	l->rng = l->cfg.seed ^ 0x67656e6572617465u;
	l->fresh = GEN_FRESH_BASE;
	l->pool_n = 0;
	for (int s = 0; s < GEN_SYSTEM_PROMPTS; s++) {
		l->system_len[s] =
		    GEN_SYSTEM_MIN +
		    rng_below(l, GEN_SYSTEM_MAX - GEN_SYSTEM_MIN + 1);
	}
}

/* gen_next writes the next synthetic prompt into l->scratch. */
static void
gen_next(sim_load *l)
{
	gen_prompt *p = &l->scratch;
	uint32_t add;
	if (l->pool_n > 0 && rng_below(l, 100) < GEN_FOLLOWUP_PCT) {
		*p = l->pool[rng_below(l, l->pool_n)];
		add = 1 + rng_below(l, GEN_TURN_MAX);
	} else {
		uint32_t s = rng_below(l, GEN_SYSTEM_PROMPTS);
		p->tenant = l->fresh; /* unique, and leaves the rng alone */
		p->n = l->system_len[s];
		for (uint32_t i = 0; i < p->n; i++) {
			p->ids[i] = GEN_SYSTEM_BASE + ((uint64_t)s << 20) + i;
		}
		add = 1 + rng_below(l, GEN_SUFFIX_MAX);
	}
	for (uint32_t i = 0; i < add && p->n < GEN_MAX_IDS; i++) {
		p->ids[p->n++] = l->fresh++;
	}
	uint32_t slot =
	    l->pool_n < GEN_POOL ? l->pool_n++ : rng_below(l, GEN_POOL);
	l->pool[slot] = *p;
}

kvi_err
sim_load_open(const sim_load_config *cfg, sim_load **out, char *err,
	      size_t errlen)
{
	sim_load *l = kvi_calloc(1, sizeof(*l));
	l->cfg = *cfg;
	if (l->cfg.copies == 0) {
		l->cfg.copies = 1;
	}
	if (l->cfg.blocks_per_id == 0) {
		l->cfg.blocks_per_id = 1;
	}
	if (cfg->trace_path != NULL) {
		kvi_err rv = trace_read(l, cfg->trace_path, err, errlen);
		if (rv != KVI_OK) {
			sim_load_free(l);
			return rv;
		}
		l->per_pass = (uint64_t)l->n_lines * l->cfg.copies;
	} else {
		if (cfg->generate == 0) {
			snprintf(err, errlen,
				 "no trace and nothing to generate");
			sim_load_free(l);
			return KVI_EINVAL;
		}
		l->pool = kvi_calloc(GEN_POOL, sizeof(*l->pool));
		gen_reset(l);
		l->per_pass = cfg->generate;
	}
	l->total = cfg->requests ? cfg->requests
		   : cfg->loop   ? UINT64_MAX
				 : l->per_pass;
	if (!cfg->loop && cfg->requests > l->per_pass) {
		l->total = l->per_pass;
	}
	*out = l;
	return KVI_OK;
}

void
sim_load_free(sim_load *l)
{
	if (l == NULL) {
		return;
	}
	kvi_free(l->ids);
	kvi_free(l->offsets);
	kvi_free(l->pool);
	kvi_free(l->tokens);
	kvi_free(l);
}

uint64_t
sim_load_total(const sim_load *l)
{
	return l->total;
}

static uint32_t *
token_space(sim_load *l, size_t n_blocks)
{
	size_t need = n_blocks * l->cfg.block_size;
	if (need > l->cap_tokens) {
		l->cap_tokens = need * 2;
		l->tokens = kvi_reallocarray(l->tokens, l->cap_tokens,
					     sizeof(uint32_t));
	}
	return l->tokens;
}

/* draw returns a hash of an id for the keys. */
static uint64_t
draw(uint64_t id, uint64_t what)
{
	uint64_t state = id ^ what;
	return splitmix64(&state);
}

/* set_keys derives the keys of a prompt of ids (shifted by offset) whose
 * salt and LoRA are drawn from tenant, and writes its image into tokens;
 * returns NULL without keys. */
static const kvi_prompt_keys *
set_keys(sim_load *l, const uint64_t *ids, size_t n, uint64_t offset,
	 uint64_t tenant, uint32_t *tokens, size_t n_tokens)
{
	kvi_prompt_keys *k = &l->keys;
	memset(k, 0, sizeof(*k));
	if (n == 0) {
		return NULL;
	}
	uint64_t first = tenant;
	uint64_t s =
	    l->cfg.salts ? draw(first, 0x73616c74u) % (l->cfg.salts + 1) : 0;
	uint64_t a =
	    l->cfg.loras ? draw(first, 0x6c6f7261u) % (l->cfg.loras + 1) : 0;
	if (s > 0) {
		k->salt_len =
		    (size_t)snprintf(l->salt, sizeof(l->salt), "salt-%llu",
				     (unsigned long long)s);
		k->cache_salt = l->salt;
	}
	if (a > 0) {
		k->lora_len =
		    (size_t)snprintf(l->lora, sizeof(l->lora), "lora-%llu",
				     (unsigned long long)a);
		k->lora_name = l->lora;
	}
	uint32_t bs = l->cfg.block_size, per = l->cfg.blocks_per_id;
	uint64_t img = n > 1 ? draw(ids[1] + offset, 0x696d6167u) : 1;
	if (l->cfg.mm_every > 0 && img % l->cfg.mm_every == 0) {
		uint64_t start = (uint64_t)per * bs;
		uint64_t len = (3 + (img >> 32) % 38) * bs - bs / 2;
		if (len > 0 && start + len <= n_tokens) {
			for (uint64_t t = start; t < start + len; t++) {
				tokens[t] = SIM_PLACEHOLDER;
			}
			l->image = (kvi_mm_item){
			    .id = l->image_id,
			    .id_len = (size_t)snprintf(
				l->image_id, sizeof(l->image_id), "img-%016llx",
				(unsigned long long)img),
			    .offset = start,
			    .length = len};
			k->mm = &l->image;
			k->n_mm = 1;
		}
	}
	return k->salt_len || k->lora_len || k->n_mm ? k : NULL;
}

bool
sim_load_next(sim_load *l, const uint32_t **tokens, uint32_t *n_blocks)
{
	const kvi_prompt_keys *keys;
	return sim_load_next_keyed(l, tokens, n_blocks, &keys);
}

bool
sim_load_next_keyed(sim_load *l, const uint32_t **tokens, uint32_t *n_blocks,
		    const kvi_prompt_keys **keys)
{
	if (l->done >= l->total) {
		return false;
	}
	uint64_t r = l->done % l->per_pass;
	bool trace = l->cfg.trace_path != NULL;
	if (r == 0 && l->done > 0 && !trace) {
		gen_reset(l); /* every pass repeats the first */
	}
	l->done++;
	const uint64_t *ids;
	size_t n;
	uint64_t offset = 0, tenant;
	if (trace) {
		size_t line = (size_t)(r / l->cfg.copies);
		offset = (r % l->cfg.copies) * l->id_span;
		ids = l->ids + l->offsets[line];
		n = l->offsets[line + 1] - l->offsets[line];
		tenant = n > 0 ? ids[0] + offset : 0;
	} else {
		gen_next(l);
		ids = l->scratch.ids;
		n = l->scratch.n;
		tenant = l->scratch.tenant;
	}
	uint32_t k = l->cfg.blocks_per_id;
	uint32_t *out = token_space(l, n * k);
	expand_into(ids, n, offset, k, l->cfg.block_size, out);
	*keys =
	    set_keys(l, ids, n, offset, tenant, out, n * k * l->cfg.block_size);
	*tokens = out;
	*n_blocks = (uint32_t)(n * k);
	return true;
}
