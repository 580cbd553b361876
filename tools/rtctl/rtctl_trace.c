/* rtctl trace dump FILE: a load trace (docs/TRACE.md) as JSON lines, one
 * object per record, for scripts and tests. Offline: reads the file with
 * the master's reader (master/ms_trace.h), no master needed.
 *
 * Each line is the record as protobuf-c's descriptors describe it (every
 * field by its .proto name, so fields added to the format show up without
 * a change here) plus "kind" (the record's oneof member) and, in each
 * heartbeat load, "samples": its sample_keys resolved to PartitionKeys.
 * A last line {"kind":"eof","truncated":BOOL,"records":N} says how the
 * file ended. Exit: 0 read to its end (cut short included), 1 refused or
 * corrupt (the reason on stderr), 2 usage. */
#include "rtctl_trace.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "ms_trace.h"
#include "rt_err.h"

static json_t *rtctl_msg_json(const ProtobufCMessage *m);

static json_t *rtctl_value_json(const ProtobufCFieldDescriptor *f,
                                const void *p)
{
    switch (f->type) {
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_SINT32:
        case PROTOBUF_C_TYPE_SFIXED32:
        case PROTOBUF_C_TYPE_ENUM:
            return json_integer(*(const int32_t *)p);
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_FIXED32:
            return json_integer(*(const uint32_t *)p);
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
            return json_integer((json_int_t) * (const int64_t *)p);
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64:
            return json_integer((json_int_t) * (const uint64_t *)p);
        case PROTOBUF_C_TYPE_FLOAT:
            return json_real(*(const float *)p);
        case PROTOBUF_C_TYPE_DOUBLE:
            return json_real(*(const double *)p);
        case PROTOBUF_C_TYPE_BOOL:
            return json_boolean(*(const protobuf_c_boolean *)p);
        case PROTOBUF_C_TYPE_STRING: {
            const char *s = *(char *const *)p;
            return json_string(s ? s : "");
        }
        case PROTOBUF_C_TYPE_BYTES: {
            const ProtobufCBinaryData *b = p;
            return json_stringn((const char *)b->data, b->len);
        }
        case PROTOBUF_C_TYPE_MESSAGE: {
            const ProtobufCMessage *m = *(ProtobufCMessage *const *)p;
            return m ? rtctl_msg_json(m) : json_null();
        }
    }
    return json_null();
}

static size_t rtctl_type_size(ProtobufCType t)
{
    switch (t) {
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64:
        case PROTOBUF_C_TYPE_DOUBLE:
            return 8;
        case PROTOBUF_C_TYPE_BOOL:
            return sizeof(protobuf_c_boolean);
        case PROTOBUF_C_TYPE_STRING:
        case PROTOBUF_C_TYPE_MESSAGE:
            return sizeof(void *);
        case PROTOBUF_C_TYPE_BYTES:
            return sizeof(ProtobufCBinaryData);
        default:
            return 4;
    }
}

static json_t *rtctl_msg_json(const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    json_t *o = json_object();
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *base = (const char *)m;
        const void *p = base + f->offset;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            const char *arr = *(char *const *)p;
            size_t sz = rtctl_type_size(f->type);
            json_t *a = json_array();
            for (size_t k = 0; k < n; k++) {
                json_array_append_new(a, rtctl_value_json(f, arr + k * sz));
            }
            json_object_set_new(o, f->name, a);
            continue;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t which = *(const uint32_t *)(base + f->quantifier_offset);
            if (which != f->id) {
                continue;
            }
        }
        if (f->type == PROTOBUF_C_TYPE_MESSAGE &&
            !*(ProtobufCMessage *const *)p) {
            continue;
        }
        json_object_set_new(o, f->name, rtctl_value_json(f, p));
    }
    return o;
}

int rtctl_trace_dump(const char *path)
{
    struct ms_trace_reader *r;
    char em[RT_ERRMSG_SIZE];
    Rt__TraceRecord *rec;
    unsigned long long n = 0;
    json_t *eof;
    int rc = ms_trace_reader_open(path, &r, em);
    if (rc) {
        fprintf(stderr, "rtctl: %s\n", em);
        return 1;
    }
    while ((rc = ms_trace_reader_next(r, &rec, em)) == 1) {
        json_t *o = json_object();
        json_t *body = rtctl_msg_json(&rec->base);
        json_object_set_new(o, "kind", json_string(ms_trace_record_kind(rec)));
        json_object_update(o, body);
        json_decref(body);
        if (rec->r_case == RT__TRACE_RECORD__R_HEARTBEAT) {
            json_t *loads =
                json_object_get(json_object_get(o, "heartbeat"), "loads");
            for (size_t i = 0; i < rec->heartbeat->n_loads; i++) {
                const Rt__TraceLoad *l = rec->heartbeat->loads[i];
                json_t *s = json_array();
                for (size_t k = 0; k < l->n_sample_keys; k++) {
                    const char *key = ms_trace_reader_key(r, l->sample_keys[k]);
                    json_array_append_new(s,
                                          key ? json_string(key) : json_null());
                }
                json_object_set_new(json_array_get(loads, i), "samples", s);
            }
        }
        json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
        json_decref(o);
        ms_trace_record_free(rec);
        n++;
    }
    if (rc < 0) {
        fprintf(stderr, "rtctl: %s: %s\n", path, em);
        ms_trace_reader_close(r);
        return 1;
    }
    eof = json_object();
    json_object_set_new(eof, "kind", json_string("eof"));
    json_object_set_new(eof, "truncated",
                        json_boolean(ms_trace_reader_truncated(r)));
    json_object_set_new(eof, "records", json_integer((json_int_t)n));
    json_dumpf(eof, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    json_decref(eof);
    ms_trace_reader_close(r);
    return fflush(stdout) == 0 ? 0 : 1;
}
