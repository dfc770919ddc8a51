/*
 * bench_query_report.h - bench_query's figures: one table (printed and
 * written to bench_query.txt), the data behind it (bench_query.dat) and a
 * latency-versus-throughput plot (bench_query.png, through gnuplot when
 * it is installed; bench_query.gp is the script).
 *
 * A row is one query kind in one answer form and one request body form
 * (json or packed) at one number of connections, with the mean request
 * body bytes of its set and each server's figures. The table gives, per
 * server, queries/s, p50 and p99 latency, CPU per query (all its
 * processes) and errors; on the kvindex line the ratios the targets use:
 * kvindex q/s over the floor's, kvindex q/s over Redis's (no AOF; "-" when
 * Redis did not run, as for packed bodies), and kvindex's p50 against 2 x
 * the floor's p50 + 150 us; last, the CPU per query of each process
 * (kvindex: coordinator+shard-0+shard-1; floor: itself; redis:
 * front+redis-server). The data file has the same figures, one block per
 * answer form, query kind, body form and server; the plot draws the packed
 * rows in dash-dot lines with square points.
 */
#ifndef KVI_TESTS_BENCH_QUERY_REPORT_H
#define KVI_TESTS_BENCH_QUERY_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "bench_query_load.h"

typedef enum bq_server {
	BQ_KVINDEX,
	BQ_FLOOR,
	BQ_REDIS,     /* AOF off */
	BQ_REDIS_AOF, /* appendonly yes, appendfsync everysec */
	BQ_SERVERS
} bq_server;

/* bq_server_name returns "kvindex", "floor", "redis" or "redis-aof". */
const char *bq_server_name(bq_server s);

/* A server's processes: coordinator and two shards for kvindex. */
#define BQ_MAX_PIDS 3

typedef struct bq_row {
	const char *kind, *form;
	const char *body;  /* body form: "json", "packed" */
	double body_bytes; /* mean request body bytes of the set */
	int conns;
	bool ran[BQ_SERVERS];
	bq_load_result r[BQ_SERVERS];
	double cpu_us[BQ_SERVERS]; /* CPU time of its processes per query */
	double cpu_part_us[BQ_SERVERS][BQ_MAX_PIDS]; /* per process */
	int n_parts[BQ_SERVERS];
} bq_row;

/* bq_report_table prints the table of rows[0..n) to f. */
void bq_report_table(FILE *f, const bq_row *rows, size_t n);

/* bq_report_write writes the .txt, .dat, .gp and .png files into dir and
 * says on stdout where they are, or that the plot was skipped and why.
 * Returns false when a file cannot be written. */
bool bq_report_write(const char *dir, const bq_row *rows, size_t n);

#endif /* KVI_TESTS_BENCH_QUERY_REPORT_H */
