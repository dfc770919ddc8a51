#include "alloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Noreturn void
kvi_oom(size_t size)
{
	fprintf(stderr, "level=fatal event=out_of_memory bytes=%zu\n", size);
	abort();
}

void *
kvi_malloc(size_t size)
{
	void *p = malloc(size ? size : 1);
	if (p == NULL) {
		kvi_oom(size);
	}
	return p;
}

void *
kvi_calloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (p == NULL) {
		kvi_oom(n * size);
	}
	return p;
}

void *
kvi_realloc(void *ptr, size_t size)
{
	void *p = realloc(ptr, size ? size : 1);
	if (p == NULL) {
		kvi_oom(size);
	}
	return p;
}

void *
kvi_reallocarray(void *ptr, size_t n, size_t size)
{
	if (size != 0 && n > SIZE_MAX / size) {
		kvi_oom(SIZE_MAX);
	}
	return kvi_realloc(ptr, n * size);
}

char *
kvi_strdup(const char *s)
{
	return kvi_strndup(s, strlen(s));
}

char *
kvi_strdup_null(const char *s)
{
	return s != NULL ? kvi_strdup(s) : NULL;
}

char *
kvi_strndup(const char *s, size_t n)
{
	char *p = kvi_malloc(n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

void
kvi_free(void *ptr)
{
	free(ptr);
}
