/* rt-load's vocabulary and its parsers (pure, unit-tested): operations,
 * operation mixes with ratios, the YCSB A-F presets, key distributions,
 * key schemes, durations and sizes.
 * Thread: any; no state. Error messages go to @err (RL_ERR_SIZE bytes). */
#ifndef RL_SPEC_H
#define RL_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "rl_keys.h"

#define RL_ERR_SIZE 256

enum rl_op {
    RL_OP_INSERT,       /* POST /t, new entity, Prefer: return-no-content */
    RL_OP_GET,          /* GET /t(PK,RK) */
    RL_OP_UPSERT,       /* PUT /t(PK,RK) without If-Match (insert or replace) */
    RL_OP_UPSERT_MERGE, /* PATCH /t(PK,RK) without If-Match (insert or merge) */
    RL_OP_UPDATE,       /* PUT /t(PK,RK), If-Match: * */
    RL_OP_MERGE,        /* PATCH /t(PK,RK), If-Match: * */
    RL_OP_DELETE,       /* DELETE /t(PK,RK), If-Match: * */
    RL_OP_QPOINT, /* GET /t()?$filter=PartitionKey eq .. and RowKey eq .. */
    RL_OP_QROWS,  /* row range in one partition: PK eq, RK ge, $top */
    RL_OP_QPARTS, /* partition range: PK ge .. and PK lt .., $top */
    RL_OP_SCAN,   /* full scan with a property filter, all pages */
    RL_OP_PAGE,   /* one query page: GET /t()?$top=N */
    RL_OP_BATCH,  /* POST /$batch: N inserts in one PartitionKey */
    RL_OP_RMW,    /* GET, then MERGE with If-Match: <ETag> (YCSB F) */
    RL_OP__NR
};

const char *rl_op_name(enum rl_op op);
/* Returns the op or -1. */
int rl_op_parse(const char *s, size_t n);
/* Does the op create a new entity id (insert, batch)? */
int rl_op_is_insert(enum rl_op op);

/* A mix: integer weights per op (0 = not used). */
struct rl_mix
{
    unsigned w[RL_OP__NR];
    unsigned total;
};

/* "get=95,update=5" (also ":" instead of "=", weights are integers or
 * decimals, scaled to integers), or a single op name ("insert" = 100%).
 * Returns 0 or -1 with a message. */
int rl_mix_parse(const char *s, struct rl_mix *mix, char *err);
/* Picks an op from a uniform @u in [0, total). */
enum rl_op rl_mix_pick(const struct rl_mix *mix, unsigned u);
/* Writes "get=95,update=5" into @out. */
void rl_mix_format(const struct rl_mix *mix, char *out, size_t n);

/* YCSB core workloads A-F mapped onto Table operations:
 *   a: get 50 / merge 50, zipfian     b: get 95 / merge 5, zipfian
 *   c: get 100, zipfian               d: get 95 / insert 5, latest
 *   e: query-rows 95 / insert 5, zipfian (short row-range scans)
 *   f: get 50 / rmw 50, zipfian
 * (YCSB "update" writes one field: a MERGE.) @name is "a".."f" or
 * "ycsb-a".."ycsb-f" (any case). Returns 0 or -1. */
int rl_ycsb_preset(const char *name,
                   struct rl_mix *mix,
                   struct rl_dist_cfg *dist,
                   char *err);

/* "uniform", "zipfian[:theta]", "latest[:theta]", "seq-asc"/"sequential",
 * "seq-desc", "hotset[:fraction[:probability[:period_s]]]"
 * (defaults theta 0.99, hotset 0.01:0.9:10). */
int rl_dist_parse(const char *s, struct rl_dist_cfg *d, char *err);
const char *rl_dist_name(enum rl_dist_kind k);

/* "seq", "hash", "rev" (rev only for RowKeys). */
int rl_scheme_parse(const char *s,
                    int allow_rev,
                    enum rl_key_scheme *out,
                    char *err);

/* Duration: "10" (seconds), "10s", "250ms", "2m", "1.5s" -> microseconds. */
int rl_duration_parse(const char *s, uint64_t *us, char *err);
/* Size: "256", "1k", "1KiB", "2m" -> bytes. */
int rl_size_parse(const char *s, uint64_t *bytes, char *err);
/* Comma list of integers "1,4,16" -> up to @max values; returns count or
 * -1. */
int rl_intlist_parse(const char *s, long *v, int max, char *err);

#endif
