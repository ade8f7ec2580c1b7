/*
 * clockshift: an LD_PRELOAD library that moves a process's wall clock by an
 * offset the test sets while the process runs (tests/support/clockshift.py).
 *
 * The offset, in microseconds, is the first 8 bytes (a native int64) of the
 * file named by $CLOCKSHIFT_FILE, mapped shared, so a write to the file moves
 * the clock of the running process at once. gettimeofday, time and
 * clock_gettime of the CLOCK_REALTIME clocks are shifted; the monotonic clocks
 * are not (a Redis server's timers keep running as they should). Every call
 * goes to the kernel by syscall, never through the dynamic linker or malloc:
 * libfaketime, which does, recurses into Debian's jemalloc-built Redis 7.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *offset_us;
static volatile int mapped;

static int64_t offset(void) {
    if (!mapped) {
        const char *path = getenv("CLOCKSHIFT_FILE");
        if (path) {
            int fd = (int)syscall(SYS_open, path, O_RDONLY);
            if (fd >= 0) {
                void *m = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
                if (m != MAP_FAILED) {
                    offset_us = (volatile int64_t *)m;
                }
                syscall(SYS_close, fd);
            }
        }
        mapped = 1;
    }
    return offset_us ? *offset_us : 0;
}

/* seconds and microseconds (0 <= us < 1e6) moved by the offset */
static void shift(int64_t *sec, int64_t *usec) {
    int64_t total = *sec * 1000000 + *usec + offset();
    int64_t s = total / 1000000, u = total % 1000000;
    if (u < 0) {
        u += 1000000;
        s -= 1;
    }
    *sec = s;
    *usec = u;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    int rc = (int)syscall(SYS_clock_gettime, clock, ts);
    if (rc == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
        int64_t sec = ts->tv_sec, usec = ts->tv_nsec / 1000, ns = ts->tv_nsec % 1000;
        shift(&sec, &usec);
        ts->tv_sec = (time_t)sec;
        ts->tv_nsec = (long)(usec * 1000 + ns);
    }
    return rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
    int rc = (int)syscall(SYS_gettimeofday, tv, tz);
    if (rc == 0 && tv) {
        int64_t sec = tv->tv_sec, usec = tv->tv_usec;
        shift(&sec, &usec);
        tv->tv_sec = (time_t)sec;
        tv->tv_usec = (suseconds_t)usec;
    }
    return rc;
}

time_t time(time_t *out) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    if (out) {
        *out = tv.tv_sec;
    }
    return tv.tv_sec;
}
