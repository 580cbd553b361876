/* Time: .NET ticks <-> civil time, ISO 8601 and RFC 1123 text.
 * Civil arithmetic is Howard Hinnant's days_from_civil/civil_from_days on
 * 64-bit integers, so the whole 0001..9999 range works whatever time_t is. */
#include "rt_time.h"

#include <string.h>
#include <time.h>

#include "rt_err.h"

#define RT__TICKS_PER_DAY (86400ULL * RT_TICKS_PER_SEC)
/* Days from 0001-01-01 to 1970-01-01. */
#define RT__DAYS_0001_TO_1970 719162LL

/* Days since 1970-01-01 of the proleptic Gregorian date y-m-d. */
static int64_t rt__days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static void rt__civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const unsigned doe = (unsigned)(z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static int rt__is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static unsigned rt__days_in_month(int64_t y, unsigned m)
{
    static const unsigned dim[12] = {31, 28, 31, 30, 31, 30,
                                     31, 31, 30, 31, 30, 31};
    return m == 2 && rt__is_leap(y) ? 29 : dim[m - 1];
}

uint64_t rt_time_now_ticks(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return RT_TICKS_UNIX_EPOCH + (uint64_t)ts.tv_sec * RT_TICKS_PER_SEC +
           (uint64_t)ts.tv_nsec / 100;
}

uint64_t rt_time_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t rt_time_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static char *rt__put_digits(char *p, uint64_t v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (char)('0' + v % 10);
        v /= 10;
    }
    return p + width;
}

/* "yyyy-MM-ddTHH:mm:ss" (years above 9999 get more digits); returns end. */
static char *rt__format_base(uint64_t ticks, char *out, uint32_t *frac)
{
    uint64_t days = ticks / RT__TICKS_PER_DAY;
    uint64_t rem = ticks % RT__TICKS_PER_DAY;
    uint64_t secs = rem / RT_TICKS_PER_SEC;
    int64_t y;
    unsigned m, d;
    char *p = out;

    *frac = (uint32_t)(rem % RT_TICKS_PER_SEC);
    rt__civil_from_days((int64_t)days - RT__DAYS_0001_TO_1970, &y, &m, &d);
    if (y > 9999) {
        int w = 0;
        for (int64_t t = y; t > 0; t /= 10) {
            w++;
        }
        p = rt__put_digits(p, (uint64_t)y, w);
    } else {
        p = rt__put_digits(p, (uint64_t)y, 4);
    }
    *p++ = '-';
    p = rt__put_digits(p, m, 2);
    *p++ = '-';
    p = rt__put_digits(p, d, 2);
    *p++ = 'T';
    p = rt__put_digits(p, secs / 3600, 2);
    *p++ = ':';
    p = rt__put_digits(p, secs / 60 % 60, 2);
    *p++ = ':';
    p = rt__put_digits(p, secs % 60, 2);
    return p;
}

size_t rt_time_format_iso(uint64_t ticks, char *out)
{
    uint32_t frac;
    char *p = rt__format_base(ticks, out, &frac);
    if (frac) {
        int w = 7;
        while (frac % 10 == 0) {
            frac /= 10;
            w--;
        }
        *p++ = '.';
        p = rt__put_digits(p, frac, w);
    }
    *p++ = 'Z';
    *p = '\0';
    return (size_t)(p - out);
}

size_t rt_time_format_iso7(uint64_t ticks, char *out)
{
    uint32_t frac;
    char *p = rt__format_base(ticks, out, &frac);
    *p++ = '.';
    p = rt__put_digits(p, frac, 7);
    *p++ = 'Z';
    *p = '\0';
    return (size_t)(p - out);
}

/* Reads exactly @w digits at s[*i]; returns -1 on a non-digit or short. */
static int64_t rt__digits(const char *s, size_t n, size_t *i, int w)
{
    int64_t v = 0;
    if (n - *i < (size_t)w) {
        return -1;
    }
    for (int k = 0; k < w; k++) {
        char c = s[*i + (size_t)k];
        if (c < '0' || c > '9') {
            return -1;
        }
        v = v * 10 + (c - '0');
    }
    *i += (size_t)w;
    return v;
}

static int rt__expect(const char *s, size_t n, size_t *i, char c)
{
    if (*i < n && s[*i] == c) {
        (*i)++;
        return 1;
    }
    return 0;
}

int rt_time_parse_iso(const char *s, size_t n, uint64_t *ticks)
{
    size_t i = 0;
    int64_t y, mo, d, h, mi, sec = 0, frac = 0, off = 0;

    y = rt__digits(s, n, &i, 4);
    if (y < 0 || !rt__expect(s, n, &i, '-')) {
        return RT_EINVAL;
    }
    mo = rt__digits(s, n, &i, 2);
    if (mo < 1 || mo > 12 || !rt__expect(s, n, &i, '-')) {
        return RT_EINVAL;
    }
    d = rt__digits(s, n, &i, 2);
    if (d < 1 || d > 31 || !rt__expect(s, n, &i, 'T')) {
        return RT_EINVAL;
    }
    h = rt__digits(s, n, &i, 2);
    if (h < 0 || h > 23 || !rt__expect(s, n, &i, ':')) {
        return RT_EINVAL;
    }
    mi = rt__digits(s, n, &i, 2);
    if (mi < 0 || mi > 59) {
        return RT_EINVAL;
    }
    if (rt__expect(s, n, &i, ':')) {
        sec = rt__digits(s, n, &i, 2);
        if (sec < 0 || sec > 59) {
            return RT_EINVAL;
        }
        if (rt__expect(s, n, &i, '.')) {
            int w = 0;
            while (i < n && s[i] >= '0' && s[i] <= '9') {
                if (++w > 7) {
                    return RT_EINVAL;
                }
                frac = frac * 10 + (s[i] - '0');
                i++;
            }
            if (w == 0) {
                return RT_EINVAL;
            }
            for (; w < 7; w++) {
                frac *= 10;
            }
        }
    }
    if (i < n && s[i] == 'Z') {
        i++;
    } else if (i < n && (s[i] == '+' || s[i] == '-')) {
        int neg = s[i] == '-';
        int64_t oh, om;
        i++;
        oh = rt__digits(s, n, &i, 2);
        if (oh < 0 || oh > 14 || !rt__expect(s, n, &i, ':')) {
            return RT_EINVAL;
        }
        om = rt__digits(s, n, &i, 2);
        if (om < 0 || om > 59) {
            return RT_EINVAL;
        }
        off = (oh * 60 + om) * 60;
        if (neg) {
            off = -off;
        }
    }
    if (i != n) {
        return RT_EINVAL;
    }
    if (d > rt__days_in_month(y, (unsigned)mo)) {
        return RT_EINVAL;
    }
    /* Local time minus the zone offset is UTC. Signed ticks fit int64 for
     * years 0..9999 plus any offset. */
    int64_t days = rt__days_from_civil(y, (unsigned)mo, (unsigned)d) +
                   RT__DAYS_0001_TO_1970;
    int64_t secs = days * 86400 + h * 3600 + mi * 60 + sec - off;
    int64_t t = secs * (int64_t)RT_TICKS_PER_SEC + frac;
    if (t < (int64_t)RT_TICKS_MIN || t > (int64_t)RT_TICKS_MAX) {
        return RT_EOUTOFRANGE;
    }
    *ticks = (uint64_t)t;
    return 0;
}

static const char rt__wday[7][4] = {"Sun", "Mon", "Tue", "Wed",
                                    "Thu", "Fri", "Sat"};
static const char rt__mon[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

void rt_time_http_date(char *out, size_t n)
{
    struct timespec ts;
    char buf[40];
    int64_t secs, days, y;
    unsigned m, d;
    char *p = buf;

    clock_gettime(CLOCK_REALTIME, &ts);
    secs = (int64_t)ts.tv_sec;
    days = secs >= 0 ? secs / 86400 : -((-secs + 86399) / 86400);
    secs -= days * 86400;
    rt__civil_from_days(days, &y, &m, &d);
    /* 1970-01-01 was a Thursday. */
    int64_t wd = (days % 7 + 7 + 4) % 7;
    memcpy(p, rt__wday[wd], 3);
    p += 3;
    *p++ = ',';
    *p++ = ' ';
    p = rt__put_digits(p, d, 2);
    *p++ = ' ';
    memcpy(p, rt__mon[m - 1], 3);
    p += 3;
    *p++ = ' ';
    p = rt__put_digits(p, (uint64_t)y, 4);
    *p++ = ' ';
    p = rt__put_digits(p, (uint64_t)secs / 3600, 2);
    *p++ = ':';
    p = rt__put_digits(p, (uint64_t)secs / 60 % 60, 2);
    *p++ = ':';
    p = rt__put_digits(p, (uint64_t)secs % 60, 2);
    memcpy(p, " GMT", 5);
    p += 4;
    if (n == 0) {
        return;
    }
    size_t len = (size_t)(p - buf);
    if (len >= n) {
        len = n - 1;
    }
    memcpy(out, buf, len);
    out[len] = '\0';
}

int rt_time_parse_http_date(const char *s, int64_t *unix_secs)
{
    size_t n = strlen(s);
    size_t i = 0;
    int64_t d, y, h, mi, sec;
    int wd = -1, mo = -1;

    if (n < 3) {
        return RT_EINVAL;
    }
    for (int k = 0; k < 7; k++) {
        if (memcmp(s, rt__wday[k], 3) == 0) {
            wd = k;
        }
    }
    i = 3;
    if (wd < 0 || !rt__expect(s, n, &i, ',') || !rt__expect(s, n, &i, ' ')) {
        return RT_EINVAL;
    }
    d = rt__digits(s, n, &i, 2);
    if (d < 1 || !rt__expect(s, n, &i, ' ') || n - i < 3) {
        return RT_EINVAL;
    }
    for (int k = 0; k < 12; k++) {
        if (memcmp(s + i, rt__mon[k], 3) == 0) {
            mo = k + 1;
        }
    }
    i += 3;
    if (mo < 0 || !rt__expect(s, n, &i, ' ')) {
        return RT_EINVAL;
    }
    y = rt__digits(s, n, &i, 4);
    if (y < 0 || !rt__expect(s, n, &i, ' ')) {
        return RT_EINVAL;
    }
    h = rt__digits(s, n, &i, 2);
    if (h < 0 || h > 23 || !rt__expect(s, n, &i, ':')) {
        return RT_EINVAL;
    }
    mi = rt__digits(s, n, &i, 2);
    if (mi < 0 || mi > 59 || !rt__expect(s, n, &i, ':')) {
        return RT_EINVAL;
    }
    sec = rt__digits(s, n, &i, 2);
    /* 60: a leap second is legal RFC 1123 text. */
    if (sec < 0 || sec > 60 || n - i != 4 || memcmp(s + i, " GMT", 4) != 0) {
        return RT_EINVAL;
    }
    if (d > rt__days_in_month(y, (unsigned)mo)) {
        return RT_EINVAL;
    }
    *unix_secs = rt__days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 +
                 h * 3600 + mi * 60 + sec;
    return 0;
}
