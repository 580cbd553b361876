/* Test helpers: a fake rt-master for partition-server tests. It listens
 * on an ephemeral loopback port and answers PS_REGISTER and PS_HEARTBEAT
 * with the assignment scripted in a slot (one slot per partition server),
 * recording what each server reported; any other method gets
 * RT_ENOTIMPL, or goes to the test's handler (other) when set. The test drives
 * the rest (ASSIGN_RANGES, MOVE_*, ...) itself on the server's master link
 * (slot.conn).
 *
 * Which slot a request belongs to: a registration goes to the slot whose
 * addr equals RegisterReq.addr, else to the slot already holding that
 * connection, else to the first slot in use (id != 0) with an empty addr
 * (so a test with one server need not know its address). A heartbeat
 * goes to the slot whose id equals its server_id, else to the slot holding
 * the connection. Requests that match no slot, or do not unpack, are
 * counted in bad_requests and answered RT_EINVAL.
 *
 * A follower: with not_leader set, every request but PING is answered
 * RT_ENOTLEADER naming not_leader as the leader's RPC address ("" = no
 * leader known), and counted in not_leader_answers.
 *
 * Thread: the test's loop thread. Strings given to it are copied. */
#ifndef TH_FAKE_MASTER_H
#define TH_FAKE_MASTER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "rt.pb-c.h"
#include "rt_rpc.h"

#define TH_FM_SLOTS 4
#define TH_FM_RANGES 4
#define TH_FM_KEYS 16 /* per-range figures kept for range ids below this */

struct th_fm_slot
{
    /* Script: set by the test. */
    uint64_t id;                    /* server id it answers; 0 = slot unused */
    char addr[320];                 /* the server's address if known, else "" */
    Rt__Range ranges[TH_FM_RANGES]; /* th_fake_master_set_range */
    Rt__Range *ptrs[TH_FM_RANGES];
    char low[TH_FM_RANGES][64];
    char high[TH_FM_RANGES][64];
    size_t n; /* ranges answered: ptrs[0..n) */

    /* The server's master link since its last registration (a reference
     * is held; th_fake_master_forget drops it). */
    struct rt_rpc_conn *conn;

    /* Seen. */
    int registers;
    uint64_t reg_server_id; /* of the last registration */
    char reg_addr[128];
    size_t reg_n_range_ids;
    uint64_t reg_range_ids[TH_FM_RANGES];
    int heartbeats;
    /* Summed over all heartbeats. */
    uint64_t hb_requests;
    uint64_t hb_throttled;
    size_t hb_samples; /* sample PKs */
    /* From the last heartbeat. */
    uint64_t hb_max_server_eps;
    uint64_t hb_max_range_eps;
    uint64_t hb_keys[TH_FM_KEYS]; /* key_count by range id */
    uint64_t hb_key_bytes[TH_FM_KEYS];
    uint64_t hb_interval_ms[TH_FM_KEYS];
};

struct th_fake_master
{
    struct rt_rpc_server *srv;
    int port;
    char addr[64];        /* "127.0.0.1:port", for --master */
    uint64_t map_version; /* answered with every assignment */
    uint64_t master_term; /* likewise; 0 = a master older than terms */
    struct th_fm_slot slot[TH_FM_SLOTS];
    int bad_requests;
    /* Set by the test: requests of any other method go here instead of
     * being answered RT_ENOTIMPL (the handler answers them). */
    rt_rpc_request_cb other;
    void *other_ud;
    /* Set by the test: act as a follower naming this leader. */
    const char *not_leader;
    int not_leader_answers;
};

/* Starts listening on @loop. @m must be zeroed (or scripted) before;
 * slots can be scripted at any time. Returns 0 or an rt_rpc error. */
int th_fake_master_start(struct th_fake_master *m, uv_loop_t *loop);
/* Sets range @i of slot @s: range @id of table @table, [@low, @high)
 * (@high NULL = unbounded), at @epoch, served by the slot's id. The
 * slot's n is left to the test. */
void th_fake_master_set_range(struct th_fake_master *m,
                              int s,
                              size_t i,
                              uint64_t id,
                              uint64_t table,
                              const char *low,
                              const char *high,
                              uint64_t epoch);
/* Drops slot @s's connection reference (its server went away). */
void th_fake_master_forget(struct th_fake_master *m, int s);
/* Drops every connection reference and closes the listener; the handles
 * close when the loop runs next. */
void th_fake_master_close(struct th_fake_master *m);

#endif
