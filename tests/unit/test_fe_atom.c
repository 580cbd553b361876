/* The AtomPub codec (frontend/fe_atom.h, docs/table-api-spec.md §10) and
 * the libxml2 reader under it (fe_xml.h): every EDM type parsed from an
 * entry and written back, m:null, the errors of bad entries, hostile XML
 * (DOCTYPE, entities, external entities, depth), the negotiation rules
 * (fe_hdr_atom) and the error document. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fe_atom.h"
#include "fe_hdr.h"
#include "fe_xml.h"
#include "rt_entity.h"
#include "rt_err.h"

#define HEAD                                                                   \
    "<?xml version=\"1.0\" encoding=\"utf-8\"?><entry xmlns:d=\"" FE_ATOM_NS_D \
    "\" xmlns:m=\"" FE_ATOM_NS_M "\" xmlns=\"" FE_ATOM_NS                      \
    "\"><title /><content type=\"application/xml\"><m:properties>"
#define TAIL "</m:properties></content></entry>"
#define KEYS "<d:PartitionKey>p</d:PartitionKey><d:RowKey>r</d:RowKey>"

static int parse(const char *props, struct fe_entity_in *in)
{
    char buf[8192];
    char errmsg[RT_ERRMSG_SIZE];
    snprintf(buf, sizeof(buf), HEAD "%s" TAIL, props);
    return fe_atom_parse_entity(buf, strlen(buf), in, errmsg);
}

static int parse_raw(const char *doc)
{
    struct fe_entity_in in;
    char errmsg[RT_ERRMSG_SIZE];
    int rc;
    fe_entity_in_init(&in);
    rc = fe_atom_parse_entity(doc, strlen(doc), &in, errmsg);
    fe_entity_in_free(&in);
    return rc;
}

/* Every EDM type: parsed into the same typed properties JSON would give,
 * and written back with the m:type Azure uses. */
static void test_every_type_round_trip(void **state)
{
    static const char *const props = KEYS
        "<d:S>a &lt;b&gt; &amp; &quot;c&quot;</d:S>"
        "<d:Bin m:type=\"Edm.Binary\">AAH+/w==</d:Bin>"
        "<d:B m:type=\"Edm.Boolean\">true</d:B>"
        "<d:B0 m:type=\"Edm.Boolean\">0</d:B0>"
        "<d:Dt m:type=\"Edm.DateTime\">2008-07-10T00:00:00</d:Dt>"
        "<d:D m:type=\"Edm.Double\"> 1.5 </d:D>"
        "<d:Nan m:type=\"Edm.Double\">NaN</d:Nan>"
        "<d:Inf m:type=\"Edm.Double\">INF</d:Inf>"
        "<d:NInf m:type=\"Edm.Double\">-INF</d:NInf>"
        "<d:G m:type=\"Edm.Guid\">c9da6455-213d-42c9-9a79-3e9149a57833"
        "</d:G>"
        "<d:I m:type=\"Edm.Int32\">-7</d:I>"
        "<d:L m:type=\"Edm.Int64\">9223372036854775807</d:L>"
        "<d:Null m:type=\"Edm.Int32\" m:null=\"true\" />"
        "<d:E></d:E>";
    struct fe_entity_in in;
    struct rt_buf out = RT_BUF_INIT;
    struct rt_props_iter it;
    struct rt_prop p;
    struct fe_odata_ctx ctx = {"http://h/acct", "acct", "t",
                               FE_META_MINIMAL, NULL,   0};
    int n = 0;
    (void)state;

    fe_entity_in_init(&in);
    assert_int_equal(parse(props, &in), 0);
    assert_string_equal(in.pk, "p");
    assert_string_equal(in.rk, "r");
    assert_int_equal(rt_props_iter_init(&it, in.props.data, in.props.len), 0);
    while (rt_props_next(&it, &p) == 1) {
        n++;
        if (p.name_len == 1 && p.name[0] == 'I') {
            assert_int_equal(p.type, RT_EDM_INT32);
            assert_int_equal(p.v.i32, -7);
        } else if (p.name_len == 1 && p.name[0] == 'L') {
            assert_int_equal(p.type, RT_EDM_INT64);
            assert_true(p.v.i64 == INT64_MAX);
        } else if (p.name_len == 2 && memcmp(p.name, "B0", 2) == 0) {
            assert_int_equal(p.type, RT_EDM_BOOL);
            assert_int_equal(p.v.b, 0);
        } else if (p.name_len == 1 && p.name[0] == 'S') {
            assert_int_equal(p.type, RT_EDM_STRING);
            assert_int_equal(p.v.bytes.n, strlen("a <b> & \"c\""));
        } else if (p.name_len == 3 && memcmp(p.name, "Bin", 3) == 0) {
            assert_int_equal(p.type, RT_EDM_BINARY);
            assert_int_equal(p.v.bytes.n, 4);
        }
    }
    assert_int_equal(n, 13); /* m:null is absent */

    assert_int_equal(
        fe_atom_write_inserted(&out, &ctx, in.pk, in.rk, 621355968000000000ull,
                               in.props.data, in.props.len),
        0);
    {
        const char *s = (const char *)rt_buf_cstr(&out);
        static const char *const want[] = {
            "<d:S>a &lt;b&gt; &amp; &quot;c&quot;</d:S>",
            "<d:Bin m:type=\"Edm.Binary\">AAH+/w==</d:Bin>",
            "<d:B m:type=\"Edm.Boolean\">true</d:B>",
            "<d:B0 m:type=\"Edm.Boolean\">false</d:B0>",
            "<d:Dt m:type=\"Edm.DateTime\">2008-07-10T00:00:00Z</d:Dt>",
            "<d:D m:type=\"Edm.Double\">1.5</d:D>",
            "<d:Nan m:type=\"Edm.Double\">NaN</d:Nan>",
            "<d:Inf m:type=\"Edm.Double\">INF</d:Inf>",
            "<d:NInf m:type=\"Edm.Double\">-INF</d:NInf>",
            "<d:G m:type=\"Edm.Guid\">c9da6455-213d-42c9-9a79-3e9149a57833",
            "<d:I m:type=\"Edm.Int32\">-7</d:I>",
            "<d:L m:type=\"Edm.Int64\">9223372036854775807</d:L>",
            "<d:E></d:E>",
            "<d:Timestamp m:type=\"Edm.DateTime\">1970-01-01T00:00:00."
            "0000000Z</d:Timestamp>",
            "<id>http://h/acct/t(PartitionKey=&apos;p&apos;,RowKey=&apos;r"
            "&apos;)</id>",
            "<link rel=\"edit\" title=\"t\" href=\"t(PartitionKey=&apos;p"
            "&apos;,RowKey=&apos;r&apos;)\" />",
            "<category term=\"acct.t\" scheme=\"" FE_ATOM_SCHEME "\" />",
            "m:etag=\"W/&quot;datetime&apos;1970-01-01T00%3A00%3A00."
            "0000000Z&apos;&quot;\"",
            "xml:base=\"http://h/acct/\"",
        };
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
            if (!strstr(s, want[i])) {
                fail_msg("missing %s in %s", want[i], s);
            }
        }
        assert_null(strstr(s, "Null"));
        /* and it parses back to the same properties */
        {
            struct fe_entity_in back;
            char errmsg[RT_ERRMSG_SIZE];
            fe_entity_in_init(&back);
            assert_int_equal(fe_atom_parse_entity(s, out.len, &back, errmsg),
                             0);
            assert_int_equal(back.props.len, in.props.len);
            assert_memory_equal(back.props.data, in.props.data, in.props.len);
            fe_entity_in_free(&back);
        }
    }
    rt_buf_free(&out);
    fe_entity_in_free(&in);
}

/* Bad entries get the JSON path's codes. */
static void test_errors(void **state)
{
    static const struct
    {
        const char *props;
        int rc;
    } cases[] = {
        {KEYS "<d:x m:type=\"Edm.Int32\">abc</d:x>", RT_EINVAL},
        {KEYS "<d:x m:type=\"Edm.Int32\">2147483648</d:x>", RT_EINVAL},
        {KEYS "<d:x m:type=\"Edm.Foo\">1</d:x>", RT_EINVAL},
        {KEYS "<d:x m:type=\"Edm.Guid\">nope</d:x>", RT_EINVAL},
        {KEYS "<d:x m:type=\"Edm.Binary\">!!</d:x>", RT_EINVAL},
        {KEYS "<d:x m:type=\"Edm.Boolean\">yes</d:x>", RT_EINVAL},
        {KEYS "<d:x m:type=\"Edm.DateTime\">1500-01-01T00:00:00Z</d:x>",
         RT_EOUTOFRANGE},
        {KEYS "<d:x>1</d:x><d:x>2</d:x>", RT_EDUPPROPS},
        {KEYS "<d:x m:null=\"maybe\">1</d:x>", RT_EINVAL},
        {KEYS "<m:x>1</m:x>", RT_EINVAL},
        {KEYS "<x>1</x>", RT_EINVAL},
        {KEYS "<d:x><d:y>1</d:y></d:x>", RT_EINVAL},
        {KEYS "<d:_1a-b>1</d:_1a-b>", RT_EPROPNAME},
        {"<d:PartitionKey m:type=\"Edm.Int32\">1</d:PartitionKey>"
         "<d:RowKey>r</d:RowKey>",
         RT_EINVAL},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fe_entity_in in;
        int rc;
        fe_entity_in_init(&in);
        rc = parse(cases[i].props, &in);
        if (rc != cases[i].rc) {
            fail_msg("case %zu (%s): %d, want %d", i, cases[i].props, rc,
                     cases[i].rc);
        }
        assert_null(in.pk);
        fe_entity_in_free(&in);
    }
}

/* Hostile documents end in RT_EINVAL, never an expansion or a read. */
static void test_hostile(void **state)
{
    char deep[40000];
    size_t n = 0;
    static const char *const docs[] = {
        "",
        "<entry",
        "<entry xmlns=\"" FE_ATOM_NS "\"></entr>",
        "<!DOCTYPE entry><entry xmlns=\"" FE_ATOM_NS "\"/>",
        "<?xml version=\"1.0\"?><!DOCTYPE l [<!ENTITY a \"aaaaaaaaaa\">"
        "<!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">"
        "<!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\">]>"
        "<entry xmlns=\"" FE_ATOM_NS "\"><title>&c;</title></entry>",
        "<!DOCTYPE e [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"
        "<entry xmlns=\"" FE_ATOM_NS "\"><title>&x;</title></entry>",
        "<!DOCTYPE e SYSTEM \"http://127.0.0.1:1/x.dtd\">"
        "<entry xmlns=\"" FE_ATOM_NS "\"/>",
        "<entry xmlns=\"" FE_ATOM_NS "\"><title>&x;</title></entry>",
        "<entry xmlns=\"urn:not-atom\"/>",
        "<entry xmlns=\"" FE_ATOM_NS "\"><q:x/></entry>",
        HEAD KEYS TAIL "<extra/>",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        if (parse_raw(docs[i]) != RT_EINVAL) {
            fail_msg("doc %zu accepted: %s", i, docs[i]);
        }
    }
    n += (size_t)snprintf(deep, sizeof(deep), "<entry xmlns=\"%s\">",
                          FE_ATOM_NS);
    for (int i = 0; i < 2000; i++) {
        memcpy(deep + n, "<a>", 3);
        n += 3;
    }
    for (int i = 0; i < 2000; i++) {
        memcpy(deep + n, "</a>", 4);
        n += 4;
    }
    memcpy(deep + n, "</entry>", 9);
    assert_int_equal(parse_raw(deep), RT_EINVAL);
}

/* The limits hold before libxml2 runs: a tag with too many attributes
 * (quadratic in libxml2 2.9.14) or namespace declarations, too many
 * elements, too deep, answered at once; quoted '>' and '=' and comments
 * do not fool the count; documents at the limits still parse. */
static void test_xml_limits(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    struct fe_xml_node *root;
    (void)state;
    /* 200k attributes: refused without the quadratic check (a timeout
     * of the test would show it) */
    rt_buf_append_str(&b, "<e");
    for (int i = 0; i < 200000; i++) {
        rt_buf_printf(&b, " a%d=\"1\"", i);
    }
    rt_buf_append_str(&b, "/>");
    assert_int_equal(fe_xml_parse((const char *)b.data, b.len, &root), RT_EXML);
    rt_buf_reset(&b);
    rt_buf_append_str(&b, "<e");
    for (int i = 0; i < 100; i++) {
        rt_buf_printf(&b, " xmlns:p%d=\"urn:%d\"", i, i);
    }
    rt_buf_append_str(&b, "/>");
    assert_int_equal(fe_xml_parse((const char *)b.data, b.len, &root), RT_EXML);
    /* at the limit, with '=' and '>' inside values and a comment */
    rt_buf_reset(&b);
    rt_buf_append_str(&b, "<e x=\"a=b>c\"");
    for (int i = 1; i < FE_XML_ATTRS_MAX; i++) {
        rt_buf_printf(&b, " a%d='=>'", i);
    }
    rt_buf_append_str(&b, "><!-- = = = <x> --><?pi = = ?></e>");
    assert_int_equal(fe_xml_parse((const char *)b.data, b.len, &root), 0);
    assert_string_equal(fe_xml_attr(root, NULL, "x"), "a=b>c");
    fe_xml_free(root);
    /* elements: FE_XML_NODES_MAX fine, one more refused */
    for (int extra = 0; extra < 2; extra++) {
        rt_buf_reset(&b);
        rt_buf_append_str(&b, "<r>");
        for (int i = 1; i < FE_XML_NODES_MAX + extra; i++) {
            rt_buf_append_str(&b, i % 2 ? "<a/>" : "<a></a>");
        }
        rt_buf_append_str(&b, "</r>");
        assert_int_equal(fe_xml_parse((const char *)b.data, b.len, &root),
                         extra ? RT_EXML : 0);
        fe_xml_free(root);
    }
    /* depth: FE_XML_DEPTH_MAX fine, one more refused */
    for (int extra = 0; extra < 2; extra++) {
        rt_buf_reset(&b);
        for (int i = 0; i < FE_XML_DEPTH_MAX + extra; i++) {
            rt_buf_append_str(&b, "<a>");
        }
        for (int i = 0; i < FE_XML_DEPTH_MAX + extra; i++) {
            rt_buf_append_str(&b, "</a>");
        }
        assert_int_equal(fe_xml_parse((const char *)b.data, b.len, &root),
                         extra ? RT_EXML : 0);
        fe_xml_free(root);
    }
    rt_buf_free(&b);
}

/* The reader keeps namespaces and attributes (fe_xml.h). */
static void test_xml_tree(void **state)
{
    static const char doc[] =
        "<?xml version=\"1.0\"?><r xmlns=\"urn:a\" xmlns:p=\"urn:p\" "
        "p:k=\"v&amp;w\" j=\"1\"><!-- c --><p:c><![CDATA[<x>]]>y</p:c></r>";
    struct fe_xml_node *root;
    (void)state;
    assert_int_equal(fe_xml_parse(doc, sizeof(doc) - 1, &root), 0);
    assert_string_equal(root->name, "r");
    assert_string_equal(root->ns, "urn:a");
    assert_string_equal(fe_xml_attr(root, "urn:p", "k"), "v&w");
    assert_string_equal(fe_xml_attr(root, NULL, "j"), "1");
    assert_null(fe_xml_attr(root, NULL, "k"));
    assert_string_equal(root->child->name, "c");
    assert_string_equal(root->child->ns, "urn:p");
    assert_string_equal(root->child->text, "<x>y");
    fe_xml_free(root);
    assert_int_equal(fe_xml_parse("<a>\0</a>", 8, &root), RT_EXML);
    assert_null(root);
}

static void test_create_table(void **state)
{
    char *name;
    static const char ok[] = HEAD "<d:TableName>mytable</d:TableName>" TAIL;
    static const char none[] = HEAD "<d:Other>x</d:Other>" TAIL;
    static const char null[] = HEAD "<d:TableName m:null=\"true\" />" TAIL;
    static const char typed[] =
        HEAD "<d:TableName m:type=\"Edm.Int32\">1</d:TableName>" TAIL;
    (void)state;
    assert_int_equal(fe_atom_parse_table(ok, sizeof(ok) - 1, &name), 0);
    assert_string_equal(name, "mytable");
    free(name);
    assert_int_equal(fe_atom_parse_table(none, sizeof(none) - 1, &name),
                     RT_ENEEDVALUE);
    assert_int_equal(fe_atom_parse_table(null, sizeof(null) - 1, &name),
                     RT_ENEEDVALUE);
    assert_int_equal(fe_atom_parse_table(typed, sizeof(typed) - 1, &name),
                     RT_EINVAL);
    assert_int_equal(fe_atom_parse_table("<x", 2, &name), RT_EINVAL);
    assert_null(name);
}

/* $select: only the named properties; an absent one once as m:null; a
 * name that cannot be an element is left out rather than break the XML. */
static void test_select(void **state)
{
    static const char *const sel[] = {"a", "a", "zz", "1bad", "RowKey"};
    struct fe_entity_in in;
    struct rt_buf out = RT_BUF_INIT;
    struct fe_xml_node *root;
    struct fe_odata_ctx ctx = {"http://h/acct", "acct", "t",
                               FE_META_MINIMAL, sel,    5};
    const char *s;
    (void)state;
    fe_entity_in_init(&in);
    assert_int_equal(parse(KEYS "<d:a>1</d:a><d:b>2</d:b>", &in), 0);
    assert_int_equal(fe_atom_write_inserted(&out, &ctx, in.pk, in.rk, 1,
                                            in.props.data, in.props.len),
                     0);
    s = rt_buf_cstr(&out);
    assert_non_null(strstr(s,
                           "<m:properties><d:RowKey>r</d:RowKey><d:a>1"
                           "</d:a><d:zz m:null=\"true\" /></m:properties>"));
    assert_int_equal(fe_xml_parse(s, out.len, &root), 0);
    fe_xml_free(root);
    rt_buf_free(&out);
    fe_entity_in_free(&in);
}

/* Which requests are answered in Atom. */
static void test_negotiation(void **state)
{
    (void)state;
    assert_int_equal(fe_hdr_atom(NULL, NULL, NULL, "2013-08-15"), 1);
    assert_int_equal(fe_hdr_atom("*/*", NULL, NULL, "2015-04-05"), 1);
    assert_int_equal(fe_hdr_atom("application/json", NULL, NULL, "2013-08-15"),
                     0);
    assert_int_equal(fe_hdr_atom("application/json", NULL, NULL, "2012-02-12"),
                     1);
    assert_int_equal(
        fe_hdr_atom("application/atom+xml", "json", NULL, "2014-02-14"), 0);
    assert_int_equal(
        fe_hdr_atom("application/json", "atom", NULL, "2014-02-14"), 1);
    assert_int_equal(
        fe_hdr_atom("application/atom+xml", NULL, NULL, "2015-12-11"), 0);
    assert_int_equal(fe_hdr_atom(NULL, NULL, NULL, "2019-02-02"), 0);
    assert_int_equal(fe_hdr_atom(NULL, NULL, NULL, NULL), 0);
    assert_int_equal(fe_hdr_atom("application/atom+xml", NULL, NULL, NULL), 1);
    assert_int_equal(fe_hdr_atom(NULL, NULL, "application/atom+xml", NULL), 1);
    assert_int_equal(fe_hdr_body_atom("application/atom+xml", "2015-04-05"), 1);
    assert_int_equal(fe_hdr_body_atom("application/atom+xml", "2015-12-11"), 0);
    assert_int_equal(fe_hdr_body_atom("application/json", "2013-08-15"), 0);
}

static void test_error_doc(void **state)
{
    struct rt_buf out = RT_BUF_INIT;
    struct fe_xml_node *root;
    (void)state;
    fe_atom_write_error(&out, "InvalidInput", "a <b>\nRequestId:x");
    assert_int_equal(fe_xml_parse((const char *)out.data, out.len, &root), 0);
    assert_string_equal(root->name, "error");
    assert_string_equal(root->ns, FE_ATOM_NS_M);
    assert_string_equal(root->child->text, "InvalidInput");
    assert_string_equal(root->child->next->text, "a <b>\nRequestId:x");
    assert_string_equal(
        fe_xml_attr(root->child->next, "http://www.w3.org/XML/1998/namespace",
                    "lang"),
        "en-US");
    fe_xml_free(root);
    rt_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_type_round_trip),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_xml_limits),
        cmocka_unit_test(test_xml_tree),
        cmocka_unit_test(test_create_table),
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_negotiation),
        cmocka_unit_test(test_error_doc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
