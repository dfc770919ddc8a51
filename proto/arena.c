#include "arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <string.h>

#include "alloc.h"

#define KVP_ARENA_ALIGN     alignof(max_align_t)
#define KVP_ARENA_FIRST     ((size_t)4096)
#define KVP_ARENA_MAX_GROWN ((size_t)1 << 20)

struct kvp_arena_chunk {
	kvp_arena_chunk *next;
	size_t size; /* bytes of data */
	alignas(max_align_t) unsigned char data[];
};

void
kvp_arena_init(kvp_arena *a)
{
	a->chunks = NULL;
	a->used = 0;
	a->next_size = KVP_ARENA_FIRST;
}

void
kvp_arena_fini(kvp_arena *a)
{
	kvp_arena_chunk *c = a->chunks;
	while (c != NULL) {
		kvp_arena_chunk *next = c->next;
		kvi_free(c);
		c = next;
	}
	a->chunks = NULL;
	a->used = 0;
}

/* kvp_arena_grow starts a new chunk that holds at least need bytes. The
 * rest of the current chunk is abandoned until the next reset. */
static void
kvp_arena_grow(kvp_arena *a, size_t need)
{
	size_t size = a->next_size > need ? a->next_size : need;
	if (size > SIZE_MAX - sizeof(kvp_arena_chunk)) {
		kvi_oom(SIZE_MAX);
	}
	kvp_arena_chunk *c = kvi_malloc(sizeof(*c) + size);
	c->size = size;
	c->next = a->chunks;
	a->chunks = c;
	a->used = 0;
	if (a->next_size < KVP_ARENA_MAX_GROWN) {
		a->next_size *= 2;
	}
}

void *
kvp_arena_alloc(kvp_arena *a, size_t size)
{
	if (size > SIZE_MAX - KVP_ARENA_ALIGN) {
		kvi_oom(size);
	}
	/* Round up so that the next allocation stays aligned; a size of 0
	 * still takes one unit so that pointers stay distinct. */
	size_t need =
	    size == 0 ? KVP_ARENA_ALIGN
		      : (size + KVP_ARENA_ALIGN - 1) & ~(KVP_ARENA_ALIGN - 1);
	if (a->chunks == NULL || a->chunks->size - a->used < need) {
		kvp_arena_grow(a, need);
	}
	void *p = a->chunks->data + a->used;
	a->used += need;
	return p;
}

void *
kvp_arena_calloc(kvp_arena *a, size_t n, size_t size)
{
	if (size != 0 && n > SIZE_MAX / size) {
		kvi_oom(SIZE_MAX);
	}
	void *p = kvp_arena_alloc(a, n * size);
	memset(p, 0, n * size);
	return p;
}

char *
kvp_arena_strdup(kvp_arena *a, const char *s)
{
	if (s == NULL) {
		return NULL;
	}
	size_t len = strlen(s);
	char *p = kvp_arena_alloc(a, len + 1);
	memcpy(p, s, len + 1);
	return p;
}

void
kvp_arena_reset(kvp_arena *a)
{
	kvp_arena_chunk *keep = NULL;
	kvp_arena_chunk *c = a->chunks;
	while (c != NULL) {
		kvp_arena_chunk *next = c->next;
		if (c->size <= KVP_ARENA_KEEP &&
		    (keep == NULL || c->size > keep->size)) {
			kvi_free(keep);
			keep = c;
		} else {
			kvi_free(c);
		}
		c = next;
	}
	if (keep != NULL) {
		keep->next = NULL;
	}
	a->chunks = keep;
	a->used = 0;
}

static void *
kvp_arena_pb_alloc(void *data, size_t size)
{
	return kvp_arena_alloc(data, size);
}

static void
kvp_arena_pb_free(void *data, void *ptr)
{
	(void)data;
	(void)ptr;
}

void
kvp_arena_allocator(kvp_arena *a, ProtobufCAllocator *out)
{
	out->alloc = kvp_arena_pb_alloc;
	out->free = kvp_arena_pb_free;
	out->allocator_data = a;
}
