/* rt_notify: the sd_notify datagram reaches an AF_UNIX socket the test
 * binds, by path and in the abstract namespace, and nothing is sent (or
 * fails) without $NOTIFY_SOCKET. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "rt_err.h"
#include "rt_notify.h"

/* ---- Fixture ---- */

struct fx
{
    int fd;
    char path[108]; /* as $NOTIFY_SOCKET writes it */
    char dir[64];
};

/* Binds a datagram socket at a path in a fresh directory, or (@abstract)
 * at an abstract name, as systemd does. */
static void fx_bind(struct fx *f, int abstract)
{
    struct sockaddr_un sa;
    socklen_t len;
    struct timeval tv = {2, 0};

    memset(f, 0, sizeof(*f));
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    f->fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    assert_true(f->fd >= 0);
    if (abstract) {
        snprintf(f->path, sizeof(f->path), "@rt-test-notify-%d", getpid());
        memcpy(sa.sun_path + 1, f->path + 1, strlen(f->path) - 1);
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
                          strlen(f->path));
    } else {
        snprintf(f->dir, sizeof(f->dir), "/tmp/rt-notify-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        snprintf(f->path, sizeof(f->path), "%s/notify", f->dir);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
        len = sizeof(sa);
    }
    assert_int_equal(bind(f->fd, (struct sockaddr *)&sa, len), 0);
    setsockopt(f->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static void fx_close(struct fx *f)
{
    close(f->fd);
    if (f->dir[0]) {
        unlink(f->path);
        rmdir(f->dir);
    }
    unsetenv("NOTIFY_SOCKET");
}

/* Receives one datagram into @buf (NUL-terminated). */
static void fx_recv(struct fx *f, char *buf, size_t size)
{
    ssize_t n = recv(f->fd, buf, size - 1, 0);
    assert_true(n >= 0);
    buf[n] = '\0';
}

/* ---- Tests ---- */

/* READY=1 arrives as one datagram at the path $NOTIFY_SOCKET names. */
static void test_ready_by_path(void **state)
{
    struct fx f;
    char buf[256];
    (void)state;
    fx_bind(&f, 0);
    setenv("NOTIFY_SOCKET", f.path, 1);
    assert_int_equal(rt_notify("READY=1\nSTATUS=serving"), 0);
    fx_recv(&f, buf, sizeof(buf));
    assert_string_equal(buf, "READY=1\nSTATUS=serving");
    fx_close(&f);
}

/* A name starting with '@' is in the abstract namespace. */
static void test_abstract(void **state)
{
    struct fx f;
    char buf[256];
    (void)state;
    fx_bind(&f, 1);
    setenv("NOTIFY_SOCKET", f.path, 1);
    assert_int_equal(rt_notifyf("STATUS=%d ranges", 7), 0);
    fx_recv(&f, buf, sizeof(buf));
    assert_string_equal(buf, "STATUS=7 ranges");
    assert_int_equal(rt_notify("STOPPING=1"), 0);
    fx_recv(&f, buf, sizeof(buf));
    assert_string_equal(buf, "STOPPING=1");
    fx_close(&f);
}

/* RELOADING=1 carries the monotonic time systemd >= 253 asks for. */
static void test_reloading(void **state)
{
    struct fx f;
    char buf[256];
    unsigned long long usec = 0;
    (void)state;
    fx_bind(&f, 0);
    setenv("NOTIFY_SOCKET", f.path, 1);
    assert_int_equal(rt_notify_reloading(), 0);
    fx_recv(&f, buf, sizeof(buf));
    assert_int_equal(sscanf(buf, "RELOADING=1\nMONOTONIC_USEC=%llu", &usec), 1);
    assert_true(usec > 0);
    fx_close(&f);
}

/* Not under a manager: nothing to do, not an error. */
static void test_no_socket(void **state)
{
    (void)state;
    unsetenv("NOTIFY_SOCKET");
    assert_int_equal(rt_notify("READY=1"), 1);
    setenv("NOTIFY_SOCKET", "", 1);
    assert_int_equal(rt_notify("READY=1"), 1);
    unsetenv("NOTIFY_SOCKET");
}

/* A relative name is refused; a socket nobody listens on is RT_EIO. */
static void test_bad_socket(void **state)
{
    (void)state;
    assert_int_equal(rt_notify_to("relative/path", "READY=1"), RT_EINVAL);
    assert_int_equal(rt_notify_to("/nonexistent/rt-notify", "READY=1"), RT_EIO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ready_by_path), cmocka_unit_test(test_abstract),
        cmocka_unit_test(test_reloading),     cmocka_unit_test(test_no_socket),
        cmocka_unit_test(test_bad_socket),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
