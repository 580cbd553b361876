#include "rl_auth.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

static const char rl__b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t rl_b64_encode(const uint8_t *in, size_t n, char *out)
{
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v =
            ((uint32_t)in[i] << 16) | ((uint32_t)in[i + 1] << 8) | in[i + 2];
        out[o++] = rl__b64[v >> 18];
        out[o++] = rl__b64[(v >> 12) & 63];
        out[o++] = rl__b64[(v >> 6) & 63];
        out[o++] = rl__b64[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n) {
            v |= (uint32_t)in[i + 1] << 8;
        }
        out[o++] = rl__b64[v >> 18];
        out[o++] = rl__b64[(v >> 12) & 63];
        out[o++] = i + 1 < n ? rl__b64[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    out[o] = '\0';
    return o;
}

static int rl__b64_val(int c)
{
    const char *p = c ? strchr(rl__b64, c) : NULL;
    return p ? (int)(p - rl__b64) : -1;
}

int rl_b64_decode(const char *in, uint8_t *out, size_t cap)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (const char *p = in; *p; p++) {
        int v;
        if (*p == '=') {
            break;
        }
        if (isspace((unsigned char)*p)) {
            continue;
        }
        v = rl__b64_val(*p);
        if (v < 0) {
            return -1;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o == cap) {
                return -1;
            }
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return (int)o;
}

int rl_signer_init(struct rl_signer *s,
                   const char *account,
                   const char *key_b64)
{
    uint8_t key[128], pad[64];
    int klen;
    memset(s, 0, sizeof(*s));
    if (strlen(account) >= RL_ACCOUNT_MAX) {
        return -1;
    }
    klen = rl_b64_decode(key_b64, key, sizeof(key));
    if (klen <= 0) {
        return -1;
    }
    if (klen > 64) {
        SHA256(key, (size_t)klen, key);
        klen = 32;
    }
    memset(pad, 0x36, sizeof(pad));
    for (int i = 0; i < klen; i++) {
        pad[i] ^= key[i];
    }
    SHA256_Init(&s->inner);
    SHA256_Update(&s->inner, pad, 64);
    memset(pad, 0x5c, sizeof(pad));
    for (int i = 0; i < klen; i++) {
        pad[i] ^= key[i];
    }
    SHA256_Init(&s->outer);
    SHA256_Update(&s->outer, pad, 64);
    OPENSSL_cleanse(key, sizeof(key));
    OPENSSL_cleanse(pad, sizeof(pad));
    memcpy(s->account, account, strlen(account) + 1);
    s->account_len = strlen(account);
    return 0;
}

void rl_signer_wipe(struct rl_signer *s)
{
    OPENSSL_cleanse(s, sizeof(*s));
}

void rl_signer_mac(const struct rl_signer *s,
                   const struct rl_piece *pc,
                   int n,
                   char *out)
{
    SHA256_CTX c = s->inner;
    uint8_t md[32];
    for (int i = 0; i < n; i++) {
        SHA256_Update(&c, pc[i].p, pc[i].n);
    }
    SHA256_Final(md, &c);
    c = s->outer;
    SHA256_Update(&c, md, sizeof(md));
    SHA256_Final(md, &c);
    rl_b64_encode(md, sizeof(md), out);
}

void rl_sign_sharedkey(const struct rl_signer *s,
                       const char *verb,
                       const char *content_type,
                       const char *date,
                       const char *path,
                       size_t path_len,
                       char *out)
{
    struct rl_piece pc[9] = {
        {verb, strlen(verb)},
        {"\n\n", 2},
        {content_type ? content_type : "",
         content_type ? strlen(content_type) : 0},
        {"\n", 1},
        {date, strlen(date)},
        {"\n/", 2},
        {s->account, s->account_len},
        {path, path_len},
    };
    rl_signer_mac(s, pc, 8, out);
}

void rl_sign_sharedkeylite(const struct rl_signer *s,
                           const char *date,
                           const char *path,
                           size_t path_len,
                           char *out)
{
    struct rl_piece pc[4] = {
        {date, strlen(date)},
        {"\n/", 2},
        {s->account, s->account_len},
        {path, path_len},
    };
    rl_signer_mac(s, pc, 4, out);
}

void rl_http_date(time_t t, char *out)
{
    static const char *const wd[] = {"Sun", "Mon", "Tue", "Wed",
                                     "Thu", "Fri", "Sat"};
    static const char *const mo[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct tm tm;
    char tmp[64];
    gmtime_r(&t, &tm);
    snprintf(tmp, sizeof(tmp), "%s, %02d %s %04d %02d:%02d:%02d GMT",
             wd[tm.tm_wday % 7], tm.tm_mday % 100, mo[tm.tm_mon % 12],
             (tm.tm_year + 1900) % 10000, tm.tm_hour % 100, tm.tm_min % 100,
             tm.tm_sec % 100);
    memcpy(out, tmp, RL_DATE_LEN);
    out[RL_DATE_LEN] = '\0';
}

static void rl__iso(time_t t, char *out)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 24, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* URL-encodes @in (RFC 3986 unreserved kept) into @out. */
static void rl__urlenc(const char *in, char *out, size_t n)
{
    static const char hx[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~') {
            if (o + 1 >= n) {
                break;
            }
            out[o++] = (char)*p;
        } else {
            if (o + 3 >= n) {
                break;
            }
            out[o++] = '%';
            out[o++] = hx[*p >> 4];
            out[o++] = hx[*p & 15];
        }
    }
    out[o] = '\0';
}

#define RL_SAS_SV "2019-02-02"

/* The URL-encoded start, expiry and signature of a SAS token. */
struct rl_sas_enc
{
    char st[64], se[64], sig[160];
};

/* Signs the string-to-sign @sts and encodes what goes into the query. */
static void rl__sas_sign(const struct rl_signer *s,
                         const char *sts,
                         size_t n,
                         const char *st,
                         const char *se,
                         struct rl_sas_enc *enc)
{
    char sig[RL_SIG_LEN + 1];
    struct rl_piece pc[1] = {{.p = sts, .n = n}};
    rl_signer_mac(s, pc, 1, sig);
    rl__urlenc(st, enc->st, sizeof(enc->st));
    rl__urlenc(se, enc->se, sizeof(enc->se));
    rl__urlenc(sig, enc->sig, sizeof(enc->sig));
}

int rl_sas_account(const struct rl_signer *s,
                   time_t start,
                   time_t expiry,
                   char *out,
                   size_t n)
{
    char st[24], se[24], sts[512];
    struct rl_sas_enc enc;
    int k;
    rl__iso(start, st);
    rl__iso(expiry, se);
    /* account \n sp \n ss \n srt \n st \n se \n sip \n spr \n sv \n */
    k = snprintf(sts, sizeof(sts),
                 "%s\nrwdlacu\nt\nsco\n%s\n%s\n\nhttps,http\n" RL_SAS_SV "\n",
                 s->account, st, se);
    rl__sas_sign(s, sts, (size_t)k, st, se, &enc);
    k = snprintf(out, n,
                 "sv=" RL_SAS_SV
                 "&ss=t&srt=sco&sp=rwdlacu&st=%s&se=%s"
                 "&spr=https%%2Chttp&sig=%s",
                 enc.st, enc.se, enc.sig);
    return k > 0 && (size_t)k < n ? 0 : -1;
}

int rl_sas_table(const struct rl_signer *s,
                 const char *table,
                 const char *sp,
                 time_t start,
                 time_t expiry,
                 char *out,
                 size_t n)
{
    char st[24], se[24], sts[512], lower[80];
    struct rl_sas_enc enc;
    size_t i;
    int k;
    for (i = 0; table[i] && i + 1 < sizeof(lower); i++) {
        lower[i] = (char)tolower((unsigned char)table[i]);
    }
    lower[i] = '\0';
    rl__iso(start, st);
    rl__iso(expiry, se);
    /* sp \n st \n se \n /table/account/table \n si \n sip \n spr \n sv \n
     * spk \n srk \n epk \n erk */
    k = snprintf(sts, sizeof(sts),
                 "%s\n%s\n%s\n/table/%s/%s\n\n\nhttps,http\n" RL_SAS_SV
                 "\n\n\n\n",
                 sp, st, se, s->account, lower);
    rl__sas_sign(s, sts, (size_t)k, st, se, &enc);
    k = snprintf(out, n,
                 "sv=" RL_SAS_SV
                 "&tn=%s&sp=%s&st=%s&se=%s&spr=https%%2Chttp"
                 "&sig=%s",
                 table, sp, enc.st, enc.se, enc.sig);
    return k > 0 && (size_t)k < n ? 0 : -1;
}
