/*
 * alloc.h - allocation wrappers that never return NULL.
 *
 * kvindex treats running out of memory as fatal: a shard that cannot
 * allocate cannot keep its index consistent, and a clean abort with a message
 * lets the supervisor restart it from its durable LMDB state. Limits that a
 * client can reach (body sizes, queue lengths) are enforced before
 * allocating, so these wrappers only abort on a genuine exhaustion.
 */
#ifndef KVI_COMMON_ALLOC_H
#define KVI_COMMON_ALLOC_H

#include <stddef.h>

void *kvi_malloc(size_t size);
void *kvi_calloc(size_t n, size_t size);
void *kvi_realloc(void *ptr, size_t size);
/* kvi_reallocarray resizes ptr to n elements of size bytes, checking the
 * multiplication for overflow. */
void *kvi_reallocarray(void *ptr, size_t n, size_t size);
char *kvi_strdup(const char *s);
/* kvi_strdup_null is kvi_strdup, NULL for NULL. */
char *kvi_strdup_null(const char *s);
char *kvi_strndup(const char *s, size_t n);
void kvi_free(void *ptr);

/* kvi_oom reports that size bytes could not be allocated and aborts. For
 * allocators kvindex does not own (library buffers) that report failure. */
_Noreturn void kvi_oom(size_t size);

#endif /* KVI_COMMON_ALLOC_H */
