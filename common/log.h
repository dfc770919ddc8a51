/*
 * log.h - structured logging: one line per event, key=value.
 *
 * A line reads
 *     ts=2026-11-30T01:02:03.456Z level=info proc=shard event=gap listener=...
 * `event` is a short snake_case name that says what happened; the rest are
 * key=value pairs given by the caller. Values that may hold spaces, quotes
 * or bytes from outside (paths, error messages, what a peer or a file
 * said) are written with kvi_log_quote(), never as "%s" in quotes. Lines are
 * written with one write(2), so lines from several threads never interleave.
 * The level and the process name are set once at start-up, before threads
 * exist.
 */
#ifndef KVI_COMMON_LOG_H
#define KVI_COMMON_LOG_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

typedef enum kvi_log_level {
	KVI_LOG_DEBUG = 0,
	KVI_LOG_INFO,
	KVI_LOG_WARN,
	KVI_LOG_ERROR,
} kvi_log_level;

/* kvi_log_setup sets the process name printed as proc= and the minimum
 * level; lines go to fd (2 for standard error). */
void kvi_log_setup(const char *proc, kvi_log_level level, int fd);

/* kvi_log_open_fd returns the descriptor a program logs to: path opened
 * for appending (created 0644, close-on-exec), or standard error (2) when
 * path is NULL; -1 after printing why to standard error when it cannot be
 * opened. */
int kvi_log_open_fd(const char *path);

/* kvi_log_parse_level parses "debug", "info", "warn" or "error".
 * Returns KVI_EINVAL for anything else. */
kvi_err kvi_log_parse_level(const char *s, kvi_log_level *out);

bool kvi_log_enabled(kvi_log_level level);

/* kvi_log writes one line for event; fmt formats the key=value pairs. */
void kvi_log(kvi_log_level level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* kvi_log_quote writes s (NULL: "") into buf (size bytes) as a
 * double-quoted value and returns buf: quotes and backslashes are escaped
 * with a backslash, newline, carriage return and tab as \n, \r and \t,
 * other control bytes, DEL and bytes that are not well-formed UTF-8 as
 * \xNN, so that the value stays on its line and the line stays UTF-8
 * whatever s holds (a file's bytes, an engine's message). Truncates at a
 * character's boundary when buf is too small. */
const char *kvi_log_quote(char *buf, size_t size, const char *s);

#define KVI_DEBUG(ev, ...) kvi_log(KVI_LOG_DEBUG, ev, __VA_ARGS__)
#define KVI_INFO(ev, ...)  kvi_log(KVI_LOG_INFO, ev, __VA_ARGS__)
#define KVI_WARN(ev, ...)  kvi_log(KVI_LOG_WARN, ev, __VA_ARGS__)
#define KVI_ERROR(ev, ...) kvi_log(KVI_LOG_ERROR, ev, __VA_ARGS__)

#endif /* KVI_COMMON_LOG_H */
