/*
 * bench_query_report.c - the table, data file and plot of bench_query
 * (bench_query_report.h).
 */
#include "bench_query_report.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bench_query_proc.h"
#include "kvitest.h"

#define MAX_GROUPS   8
#define PLOT_WAIT_MS 60000

static const char *const names[BQ_SERVERS] = {"kvindex", "floor", "redis",
					      "redis-aof"};

const char *
bq_server_name(bq_server s)
{
	return names[s];
}

/* ---- the table ------------------------------------------------------- */

static void
ratio(FILE *f, const bq_row *r, bq_server s)
{
	if (r->ran[s] && r->r[s].qps > 0) {
		fprintf(f, " %9.2f", r->r[BQ_KVINDEX].qps / r->r[s].qps);
	} else {
		fprintf(f, " %9s", "-");
	}
}

/* targets prints the kvindex line's ratios and its p50 against the bound
 * 2 x floor p50 + 150 us (blanks on the other lines). */
static void
targets(FILE *f, const bq_row *r, bq_server s)
{
	if (s != BQ_KVINDEX) {
		fprintf(f, " | %9s %9s  %-26s", "", "", "");
		return;
	}
	fprintf(f, " |");
	ratio(f, r, BQ_FLOOR);
	ratio(f, r, BQ_REDIS);
	char bound[48] = "-";
	if (r->ran[BQ_FLOOR]) {
		double b = 2 * r->r[BQ_FLOOR].p50_us + 150;
		snprintf(bound, sizeof(bound), "%.0f vs %.0f %s",
			 r->r[BQ_KVINDEX].p50_us, b,
			 r->r[BQ_KVINDEX].p50_us <= b ? "met" : "missed");
	}
	fprintf(f, "  %-26s", bound);
}

/* cpu_split prints the CPU per query of each process of s, joined by
 * '+', one figure per process whether or not the phase answered any. */
static void
cpu_split(FILE *f, const bq_row *r, bq_server s)
{
	for (int i = 0; i < r->n_parts[s]; i++) {
		fprintf(f, "%s%.0f", i ? "+" : "", r->cpu_part_us[s][i]);
	}
	if (r->n_parts[s] == 0) {
		fprintf(f, "-");
	}
}

void
bq_report_table(FILE *f, const bq_row *rows, size_t n)
{
	fprintf(f,
		"%-6s %-5s %-6s %7s %5s %-9s %9s %9s %9s %9s %6s | %9s %9s  "
		"%-26s %s\n",
		"query", "form", "body", "body_B", "conns", "server", "q/s",
		"p50_us", "p99_us", "cpu_us/q", "errors", "kvi/floor",
		"kvi/redis", "kvi p50 vs 2*floor p50+150",
		"cpu_us/q by process");
	for (size_t i = 0; i < n; i++) {
		const bq_row *r = &rows[i];
		for (int s = 0; s < BQ_SERVERS; s++) {
			if (!r->ran[s]) {
				continue;
			}
			const bq_load_result *x = &r->r[s];
			fprintf(f,
				"%-6s %-5s %-6s %7.0f %5d %-9s %9.0f %9.0f "
				"%9.0f %9.1f %6zu",
				r->kind, r->form, r->body, r->body_bytes,
				r->conns, names[s], x->qps, x->p50_us,
				x->p99_us, r->cpu_us[s], x->errors);
			targets(f, r, s);
			fprintf(f, " ");
			cpu_split(f, r, s);
			fprintf(f, "\n");
		}
	}
}

/* ---- the data file and the plot ---------------------------------------- */

typedef struct groups {
	const char *kind[MAX_GROUPS], *form[MAX_GROUPS], *body[MAX_GROUPS];
	size_t n_kind, n_form, n_body;
	bool ran[MAX_GROUPS][BQ_SERVERS]; /* per body form */
	bool any[BQ_SERVERS];             /* for some body form */
} groups;

/* add_unique adds s to v[0..*n) unless it is there; returns its index. */
static size_t
add_unique(const char **v, size_t *n, const char *s)
{
	for (size_t i = 0; i < *n; i++) {
		if (strcmp(v[i], s) == 0) {
			return i;
		}
	}
	if (*n < MAX_GROUPS) {
		v[(*n)++] = s;
	}
	return *n - 1;
}

static groups
groups_of(const bq_row *rows, size_t n)
{
	groups g = {0};
	for (size_t i = 0; i < n; i++) {
		add_unique(g.kind, &g.n_kind, rows[i].kind);
		add_unique(g.form, &g.n_form, rows[i].form);
		size_t b = add_unique(g.body, &g.n_body, rows[i].body);
		for (int s = 0; s < BQ_SERVERS; s++) {
			g.ran[b][s] = g.ran[b][s] || rows[i].ran[s];
			g.any[s] = g.any[s] || rows[i].ran[s];
		}
	}
	return g;
}

static bool
row_in(const bq_row *r, const groups *g, size_t fi, size_t ki, size_t bi)
{
	return strcmp(r->kind, g->kind[ki]) == 0 &&
	       strcmp(r->form, g->form[fi]) == 0 &&
	       strcmp(r->body, g->body[bi]) == 0;
}

/* write_block writes the data block of form fi, kind ki, body form bi and
 * server s. */
static void
write_block(FILE *f, const groups *g, const bq_row *rows, size_t n, size_t fi,
	    size_t ki, size_t bi, bq_server s)
{
	fprintf(f, "# query=%s form=%s body=%s server=%s\n", g->kind[ki],
		g->form[fi], g->body[bi], names[s]);
	for (size_t i = 0; i < n; i++) {
		const bq_row *r = &rows[i];
		if (!r->ran[s] || !row_in(r, g, fi, ki, bi)) {
			continue;
		}
		fprintf(f, "%d %.1f %.1f %.1f %.2f %zu %s %.0f ", r->conns,
			r->r[s].qps, r->r[s].p50_us, r->r[s].p99_us,
			r->cpu_us[s], r->r[s].errors, r->body, r->body_bytes);
		cpu_split(f, r, s);
		fprintf(f, "\n");
	}
	fprintf(f, "\n\n");
}

/* write_dat writes one data block per form, kind, body form and server
 * that ran with that body form (gnuplot's "index" counts them in that
 * order). */
static void
write_dat(FILE *f, const groups *g, const bq_row *rows, size_t n)
{
	fprintf(f, "# conns qps p50_us p99_us cpu_us_per_query errors body "
		   "body_bytes cpu_us_per_query_by_process\n");
	for (size_t fi = 0; fi < g->n_form; fi++) {
		for (size_t ki = 0; ki < g->n_kind; ki++) {
			for (size_t bi = 0; bi < g->n_body; bi++) {
				for (int s = 0; s < BQ_SERVERS; s++) {
					if (g->ran[bi][s]) {
						write_block(f, g, rows, n, fi,
							    ki, bi, s);
					}
				}
			}
		}
	}
}

static const char *
kind_title(const char *kind)
{
	if (strcmp(kind, "trace") == 0) {
		return "trace prompts (real lengths)";
	}
	return strcmp(kind, "100") == 0 ? "100-block prompts"
					: "1,000-block prompts";
}

/* The lines of a body form: JSON solid (p50) and dashed (p99) with
 * circles, packed dash-dot and dash-dot-dot with squares. */
static void
write_lines(FILE *f, const char *body, int index, int color, const char *name)
{
	bool packed = strcmp(body, "json") != 0;
	const char *label = packed ? " packed" : "";
	fprintf(f,
		"dat index %d using 2:3 with linespoints lc %d dt %d pt %d "
		"title '%s%s p50', \\\n  dat index %d using 2:4 with "
		"linespoints lc %d dt %d pt %d title '%s%s p99'",
		index, color, packed ? 4 : 1, packed ? 5 : 7, name, label,
		index, color, packed ? 5 : 2, packed ? 4 : 6, name, label);
}

static void
write_panel(FILE *f, const groups *g, size_t fi, size_t ki, int *index)
{
	fprintf(f, "set title '%s, %s answers'\nplot ", kind_title(g->kind[ki]),
		strcmp(g->form[fi], "full") == 0 ? "full" : "top-8");
	int lines = 0;
	for (size_t bi = 0; bi < g->n_body; bi++) {
		int color = 0;
		for (int s = 0; s < BQ_SERVERS; s++) {
			color += g->any[s];
			if (!g->ran[bi][s]) {
				continue;
			}
			fprintf(f, "%s", lines++ > 0 ? ", \\\n  " : "");
			write_lines(f, g->body[bi], *index, color, names[s]);
			(*index)++;
		}
	}
	fprintf(f, "\n");
}

static void
write_gp(FILE *f, const groups *g, const char *dat, const char *png)
{
	fprintf(f,
		"set encoding utf8\n"
		"if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
		"  set terminal pngcairo size %zu,%zu font ',9'\n"
		"} else {\n  set terminal png size %zu,%zu\n}\n"
		"set output '%s'\ndat = '%s'\n"
		"set multiplot layout %zu,%zu title 'bench\\_query: latency "
		"versus throughput (1 to N connections)'\n"
		"set logscale xy\nset grid\nset key top right font ',8'\n"
		"set xlabel 'queries/s'\nset ylabel 'latency (µs)'\n",
		520 * g->n_kind, 420 * g->n_form, 520 * g->n_kind,
		420 * g->n_form, png, dat, g->n_form, g->n_kind);
	int index = 0;
	for (size_t fi = 0; fi < g->n_form; fi++) {
		for (size_t ki = 0; ki < g->n_kind; ki++) {
			write_panel(f, g, fi, ki, &index);
		}
	}
	fprintf(f, "unset multiplot\n");
}

static bool
write_file(const char *dir, const char *name, const groups *g,
	   const bq_row *rows, size_t n, char **path)
{
	*path = kvt_path(dir, name);
	FILE *f = fopen(*path, "w");
	if (f == NULL) {
		fprintf(stderr, "cannot write %s\n", *path);
		return false;
	}
	if (strstr(name, ".txt") != NULL) {
		bq_report_table(f, rows, n);
	} else {
		write_dat(f, g, rows, n);
	}
	return fclose(f) == 0;
}

/* plot runs gnuplot on the script; a missing gnuplot is only a note. */
static void
plot(const char *dir, const char *gp, const char *png)
{
	char *gnuplot = bq_which("gnuplot");
	if (gnuplot == NULL) {
		printf("note: gnuplot is not installed, no plot\n");
		return;
	}
	char *log = kvt_path(dir, "gnuplot.log");
	const char *argv[] = {gnuplot, gp, NULL};
	kvt_proc *p;
	int status = -1;
	if (kvt_proc_start(argv, log, &p) == KVI_OK) {
		kvt_proc_wait(p, PLOT_WAIT_MS, &status);
		kvt_proc_free(p);
	}
	if (status == 0) {
		printf("plot: %s\n", png);
	} else {
		printf("note: gnuplot failed (status %d), see %s\n", status,
		       log);
	}
	kvi_free(log);
	kvi_free(gnuplot);
}

bool
bq_report_write(const char *dir, const bq_row *rows, size_t n)
{
	groups g = groups_of(rows, n);
	char *txt = NULL, *dat = NULL;
	char *gp = kvt_path(dir, "bench_query.gp");
	char *png = kvt_path(dir, "bench_query.png");
	bool ok = write_file(dir, "bench_query.txt", &g, rows, n, &txt) &&
		  write_file(dir, "bench_query.dat", &g, rows, n, &dat);
	FILE *f = ok ? fopen(gp, "w") : NULL;
	if (f != NULL) {
		write_gp(f, &g, dat, png);
		ok = fclose(f) == 0;
	} else {
		ok = false;
	}
	if (ok) {
		printf("table: %s\ndata: %s\n", txt, dat);
		plot(dir, gp, png);
	}
	kvi_free(txt);
	kvi_free(dat);
	kvi_free(gp);
	kvi_free(png);
	return ok;
}
