/* Admin request bridge (see ms_admin.h). */
#include "ms_admin.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rt_alloc.h"
#include "rt_err.h"

/* An answer held until the commit index reaches @need (loop side). */
struct ms__held
{
    struct ms_admin_req *req;
    int status;
    char *body;
    uint64_t need;
    struct ms__held *next;
};

struct ms_admin
{
    pthread_mutex_t lock; /* guards everything below and every request */
    uv_async_t *async;    /* NULL: no loop attached */
    struct ms_admin_req *head, *tail;
    ms_admin_cb cb;
    void *cb_arg;
    /* Loop side only (no lock): the output gate and what it holds. */
    struct rt_rpc_gate gate;
    bool gate_on;
    struct ms__held *held, *held_tail;
};

struct ms_admin *ms_admin_create(void)
{
    struct ms_admin *adm = rt_xcalloc(1, sizeof(*adm));
    pthread_mutex_init(&adm->lock, NULL);
    return adm;
}

static void ms__req_free(struct ms_admin_req *req)
{
    free(req->key);
    free(req->body);
    free(req);
}

/* Drops one reference (lock held); true when freed. */
static bool ms__unref(struct ms_admin_req *req)
{
    RT_PRE(req->refs > 0);
    if (--req->refs == 0) {
        ms__req_free(req);
        return true;
    }
    return false;
}

void ms_admin_destroy(struct ms_admin *adm)
{
    if (!adm) {
        return;
    }
    while (adm->head) {
        struct ms_admin_req *r = adm->head;
        adm->head = r->next;
        ms__unref(r);
    }
    pthread_mutex_destroy(&adm->lock);
    free(adm);
}

struct ms_admin_req *ms_admin_req_new(enum ms_admin_kind kind)
{
    struct ms_admin_req *req = rt_xcalloc(1, sizeof(*req));
    req->kind = kind;
    req->refs = 1;
    return req;
}

/* Sets the answer (lock held; @body taken). */
static void ms__set_result(struct ms_admin_req *req, int status, char *body)
{
    free(req->body);
    req->done = true;
    req->http_status = status;
    req->body = body;
}

/* Empties the queue (lock held); returns its requests, oldest first. */
static struct ms_admin_req *ms__take_all(struct ms_admin *adm)
{
    struct ms_admin_req *list = adm->head;
    adm->head = adm->tail = NULL;
    return list;
}

/* Unlinks the first request of @list (NULL when empty). */
static struct ms_admin_req *ms__pop(struct ms_admin_req **list)
{
    struct ms_admin_req *r = *list;
    if (r) {
        *list = r->next;
        r->next = NULL;
    }
    return r;
}

static void ms__async_cb(uv_async_t *h)
{
    struct ms_admin *adm = h->data;
    struct ms_admin_req *list, *r;

    /* Sends coalesce: everything queued so far. */
    pthread_mutex_lock(&adm->lock);
    list = ms__take_all(adm);
    pthread_mutex_unlock(&adm->lock);
    while ((r = ms__pop(&list))) {
        adm->cb(r, adm->cb_arg);
    }
}

int ms_admin_attach(struct ms_admin *adm,
                    uv_loop_t *loop,
                    ms_admin_cb cb,
                    void *arg)
{
    uv_async_t *a = rt_xcalloc(1, sizeof(*a));
    int rc = uv_async_init(loop, a, ms__async_cb);
    if (rc) {
        free(a);
        return rc;
    }
    a->data = adm;
    pthread_mutex_lock(&adm->lock);
    adm->cb = cb;
    adm->cb_arg = arg;
    adm->async = a;
    pthread_mutex_unlock(&adm->lock);
    return 0;
}

static void ms__async_close_cb(uv_handle_t *h)
{
    free(h);
}

void ms_admin_detach(struct ms_admin *adm)
{
    struct ms_admin_req *list, *r;
    uv_async_t *a;

    pthread_mutex_lock(&adm->lock);
    a = adm->async;
    adm->async = NULL;
    list = ms__take_all(adm);
    pthread_mutex_unlock(&adm->lock);
    adm->gate_on = false;
    /* Held answers depend on entries that may never commit. */
    for (struct ms__held *h = adm->held; h; h = h->next) {
        free(h->body);
        h->status = 503;
        h->body = rt_xstrdup("{\"error\":\"master is stopping\"}");
    }
    ms_admin_gate_release(adm);
    while ((r = ms__pop(&list))) {
        ms_admin_complete(adm, r, 503,
                          rt_xstrdup("{\"error\":\"master is stopping\"}"));
    }
    if (a) {
        uv_close((uv_handle_t *)a, ms__async_close_cb);
    }
}

void ms_admin_submit(struct ms_admin *adm, struct ms_admin_req *req)
{
    pthread_mutex_lock(&adm->lock);
    req->refs++;
    if (!adm->async) {
        ms__set_result(req, 503,
                       rt_xstrdup("{\"error\":\"master is stopping\"}"));
        ms__unref(req); /* still held by the caller */
        pthread_mutex_unlock(&adm->lock);
        if (req->wake) {
            req->wake(req);
        }
        return;
    }
    if (adm->tail) {
        adm->tail->next = req;
    } else {
        adm->head = req;
    }
    adm->tail = req;
    uv_async_send(adm->async);
    pthread_mutex_unlock(&adm->lock);
}

bool ms_admin_result(struct ms_admin *adm,
                     struct ms_admin_req *req,
                     int *status,
                     const char **body)
{
    bool done;
    pthread_mutex_lock(&adm->lock);
    done = req->done;
    if (done) {
        *status = req->http_status;
        *body = req->body ? req->body : "{}";
    }
    pthread_mutex_unlock(&adm->lock);
    return done;
}

void ms_admin_release(struct ms_admin *adm, struct ms_admin_req *req)
{
    pthread_mutex_lock(&adm->lock);
    ms__unref(req);
    pthread_mutex_unlock(&adm->lock);
}

static void ms__complete_now(struct ms_admin *adm,
                             struct ms_admin_req *req,
                             int http_status,
                             char *body);

void ms_admin_complete(struct ms_admin *adm,
                       struct ms_admin_req *req,
                       int http_status,
                       char *body)
{
    if (adm->gate_on) {
        uint64_t need = adm->gate.need(adm->gate.ud);
        /* Behind held answers too: they leave in order. */
        if (adm->held || need > adm->gate.have(adm->gate.ud)) {
            struct ms__held *h = rt_xcalloc(1, sizeof(*h));
            h->req = req;
            h->status = http_status;
            h->body = body;
            h->need = need;
            if (adm->held_tail) {
                adm->held_tail->next = h;
            } else {
                adm->held = h;
            }
            adm->held_tail = h;
            return;
        }
    }
    ms__complete_now(adm, req, http_status, body);
}

void ms_admin_set_gate(struct ms_admin *adm, const struct rt_rpc_gate *g)
{
    if (g) {
        adm->gate = *g;
        adm->gate_on = true;
    } else {
        adm->gate_on = false;
        ms_admin_gate_release(adm);
    }
}

void ms_admin_gate_release(struct ms_admin *adm)
{
    while (adm->held &&
           (!adm->gate_on || adm->held->need <= adm->gate.have(adm->gate.ud))) {
        struct ms__held *h = adm->held;
        adm->held = h->next;
        if (!adm->held) {
            adm->held_tail = NULL;
        }
        ms__complete_now(adm, h->req, h->status, h->body);
        free(h);
    }
}

static void ms__complete_now(struct ms_admin *adm,
                             struct ms_admin_req *req,
                             int http_status,
                             char *body)
{
    void (*wake)(struct ms_admin_req *) = NULL;
    bool freed;
    pthread_mutex_lock(&adm->lock);
    ms__set_result(req, http_status, body);
    /* wake() may make the HTTP side release its reference at once: keep
     * ours until wake has returned. */
    if (req->refs > 1) {
        wake = req->wake;
    }
    pthread_mutex_unlock(&adm->lock);
    if (wake) {
        wake(req);
    }
    pthread_mutex_lock(&adm->lock);
    freed = ms__unref(req);
    pthread_mutex_unlock(&adm->lock);
    (void)freed;
}
