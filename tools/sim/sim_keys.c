#include "sim_keys.h"

#include <string.h>

#include "alloc.h"
#include "wire_encode.h"

static uint32_t
grow_to(uint32_t cap, uint32_t need)
{
	uint32_t n = cap ? cap : 16;
	while (n < need) {
		n *= 2;
	}
	return n;
}

bool
sim_keys_empty(const kvi_prompt_keys *k)
{
	return k == NULL ||
	       (k->lora_len == 0 && k->salt_len == 0 && k->n_mm == 0);
}

/* add_text copies len bytes and a NUL into the batch's text and returns
 * their offset. */
static uint32_t
add_text(sim_batch *b, const char *s, size_t len)
{
	uint32_t need = b->text_len + (uint32_t)len + 1;
	if (need > b->text_cap) {
		b->text_cap = grow_to(b->text_cap, need);
		b->text = kvi_realloc(b->text, b->text_cap);
	}
	uint32_t off = b->text_len;
	if (len > 0) {
		memcpy(b->text + off, s, len);
	}
	b->text[off + len] = '\0';
	b->text_len = need;
	return off;
}

uint32_t
sim_batch_add_keys(sim_batch *b, const kvi_prompt_keys *k)
{
	if (b->n_reqs == b->cap_reqs) {
		b->cap_reqs = grow_to(b->cap_reqs, b->n_reqs + 1);
		b->reqs =
		    kvi_reallocarray(b->reqs, b->cap_reqs, sizeof(*b->reqs));
	}
	sim_req_keys *r = &b->reqs[b->n_reqs];
	memset(r, 0, sizeof(*r));
	if (k->lora_len > 0) {
		r->lora_off = add_text(b, k->lora_name, k->lora_len);
		r->lora_len = (uint32_t)k->lora_len;
	}
	if (k->salt_len > 0) {
		r->salt_off = add_text(b, k->cache_salt, k->salt_len);
		r->salt_len = (uint32_t)k->salt_len;
	}
	return b->n_reqs++;
}

static sim_xkey *
add_xkey(sim_batch *b, uint8_t kind, uint32_t off, uint32_t len)
{
	if (b->n_xkeys == b->cap_xkeys) {
		b->cap_xkeys = grow_to(b->cap_xkeys, b->n_xkeys + 1);
		b->xkeys =
		    kvi_reallocarray(b->xkeys, b->cap_xkeys, sizeof(*b->xkeys));
	}
	sim_xkey *x = &b->xkeys[b->n_xkeys++];
	*x = (sim_xkey){.kind = kind, .off = off, .len = len};
	return x;
}

/* add_items appends the items overlapping [start, start + bs), the scan
 * of kvi_mm_block_items. */
static void
add_items(sim_batch *b, const kvi_prompt_keys *k, uint64_t start, uint32_t bs,
	  size_t *next)
{
	uint64_t end = start + bs;
	size_t i = *next;
	while (i < k->n_mm && k->mm[i].offset < end) {
		const kvi_mm_item *it = &k->mm[i];
		if (it->offset + it->length <= start) {
			i++;
			continue;
		}
		uint32_t off = add_text(b, it->id, it->id_len);
		sim_xkey *x =
		    add_xkey(b, KVI_XKEY_MM, off, (uint32_t)it->id_len);
		x->offset = (int64_t)it->offset - (int64_t)start;
		if (it->offset + it->length > end) {
			break; /* it goes on into the next block */
		}
		i++;
	}
	*next = i;
}

void
sim_batch_block_keys(sim_batch *b, uint32_t blk, uint32_t req,
		     const kvi_prompt_keys *k, uint32_t i, size_t *next)
{
	const sim_req_keys *r = &b->reqs[req];
	if (r->lora_len > 0) {
		add_xkey(b, KVI_XKEY_STR, r->lora_off, r->lora_len);
	}
	if (k->n_mm > 0) {
		add_items(b, k, (uint64_t)i * b->block_size, b->block_size,
			  next);
	}
	if (i == 0 && r->salt_len > 0) {
		add_xkey(b, KVI_XKEY_STR, r->salt_off, r->salt_len);
	}
	b->xkey_start[blk + 1] = b->n_xkeys;
}

void
sim_keys_bytes(const sim_batch *b, uint32_t k, kvi_xbuf *x)
{
	for (uint32_t j = b->xkey_start[k]; j < b->xkey_start[k + 1]; j++) {
		const sim_xkey *xk = &b->xkeys[j];
		if (xk->kind == KVI_XKEY_MM) {
			kvi_xbuf_mm(x, b->text + xk->off, xk->len, xk->offset);
		} else {
			kvi_xbuf_record(x, KVI_EXTRA_IDENT, b->text + xk->off,
					xk->len);
		}
	}
}

const char *
sim_batch_str(const sim_batch *b, uint32_t off)
{
	return b->text + off;
}
