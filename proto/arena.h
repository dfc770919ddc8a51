/*
 * arena.h - a bump allocator for building and decoding protobuf-c messages.
 *
 * A shard answers each request with a tree of protobuf-c structs (a
 * StatusResponse holds an array of pointers to ListenerStatus, each with
 * its strings and counters). Freeing such a tree field by field is error-prone,
 * so everything a response or a decoded request needs is taken from an arena
 * and released at once by kvp_arena_reset() when the reply has been packed.
 *
 * Design: memory comes in chunks; an allocation bumps an offset in the newest
 * chunk, and a new chunk (at least twice the previous one, up to 1 MiB, or
 * the allocation's size if larger) is started when it does not fit. Every
 * allocation is aligned for any type (max_align_t). Nothing is freed one by
 * one. kvp_arena_reset() keeps one chunk of at most KVP_ARENA_KEEP bytes for
 * reuse, so a steady stream of requests does not call malloc, while a single
 * huge request does not pin its memory forever.
 *
 * Out of memory aborts through kvi_oom(): allocations never return NULL.
 * An arena is not thread-safe; each thread (each service worker) has its own.
 * The struct is public so that callers can embed it; its fields are private.
 */
#ifndef KVI_PROTO_ARENA_H
#define KVI_PROTO_ARENA_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

/* The largest chunk kvp_arena_reset() keeps for reuse. Every request slot
 * of a shard keeps one: at 1 MiB, one status poll of a few thousand
 * listeners left each shard holding 12 MiB for good. */
#define KVP_ARENA_KEEP ((size_t)64 << 10)

typedef struct kvp_arena_chunk kvp_arena_chunk;

typedef struct kvp_arena {
	kvp_arena_chunk *chunks; /* newest first */
	size_t used;             /* bytes taken from the newest chunk */
	size_t next_size;        /* minimum size of the next chunk */
} kvp_arena;

/* kvp_arena_init makes a an empty arena; it allocates nothing yet. */
void kvp_arena_init(kvp_arena *a);

/* kvp_arena_fini frees every chunk of a. It is idempotent, and an arena
 * that was only initialised survives it. */
void kvp_arena_fini(kvp_arena *a);

/* kvp_arena_alloc returns size bytes (uninitialised, suitably aligned for
 * any type) that stay valid until the next reset or fini. A size of 0 yields
 * a distinct, valid pointer. Never returns NULL. */
void *kvp_arena_alloc(kvp_arena *a, size_t size);

/* kvp_arena_calloc returns n zeroed elements of size bytes, checking the
 * multiplication for overflow. */
void *kvp_arena_calloc(kvp_arena *a, size_t n, size_t size);

/* kvp_arena_strdup returns a copy of s in a, or NULL when s is NULL (which
 * suits optional protobuf strings). */
char *kvp_arena_strdup(kvp_arena *a, const char *s);

/* kvp_arena_reset releases everything allocated from a, keeping at most one
 * chunk (of at most KVP_ARENA_KEEP bytes) for the next allocations. Every
 * pointer a returned before becomes invalid. */
void kvp_arena_reset(kvp_arena *a);

/* kvp_arena_allocator fills *out with a protobuf-c allocator that takes its
 * memory from a and ignores frees: a message unpacked with it must not be
 * freed with *__free_unpacked() and lives until a is reset. */
void kvp_arena_allocator(kvp_arena *a, ProtobufCAllocator *out);

#endif /* KVI_PROTO_ARENA_H */
