/*
 * clockshim.c: an LD_PRELOAD library that shifts a process's wall clock.
 *
 * It overrides gettimeofday, time and clock_gettime for CLOCK_REALTIME and
 * CLOCK_REALTIME_COARSE, adding an offset in microseconds that it reads
 * from the file named by the environment variable SHIM_OFFSET_FILE. The
 * file holds one signed decimal integer; a missing or empty file means no
 * offset. The file is read again at most once a millisecond, so a test can
 * move the clock of a running process by rewriting it (atomically, with a
 * rename). Monotonic clocks are left alone, as a real clock step leaves
 * them.
 *
 * Only system calls that are safe in a signal handler are used (open,
 * read, close), because a process may read its clock in one.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn real_clock_gettime;
/*
 * The path is copied: redis-server reuses the memory of its environment
 * for its process title, after constructors have run.
 */
static char offset_path[4096];
static long long offset_us;    /* the last offset read */
static long long next_read_ns; /* monotonic time of the next read */

__attribute__((constructor)) static void shim_init(void)
{
	const char *p = getenv("SHIM_OFFSET_FILE");
	size_t i;
	real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
	for (i = 0; p && p[i] && i < sizeof offset_path - 1; i++)
		offset_path[i] = p[i];
	offset_path[i] = '\0';
}

/* parse reads a signed decimal integer at the start of s. */
static long long parse(const char *s)
{
	long long v = 0;
	int neg = 0;
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s == '-' || *s == '+')
		neg = *s++ == '-';
	for (; *s >= '0' && *s <= '9'; s++)
		v = v * 10 + (*s - '0');
	return neg ? -v : v;
}

/* offset returns the current offset in microseconds. */
static long long offset(void)
{
	struct timespec m;
	long long now;
	if (!real_clock_gettime || !offset_path[0])
		return 0;
	real_clock_gettime(CLOCK_MONOTONIC, &m);
	now = (long long)m.tv_sec * 1000000000LL + m.tv_nsec;
	if (now >= __atomic_load_n(&next_read_ns, __ATOMIC_RELAXED)) {
		char buf[32];
		ssize_t n;
		int fd;
		__atomic_store_n(&next_read_ns, now + 1000000LL, __ATOMIC_RELAXED);
		fd = open(offset_path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			n = read(fd, buf, sizeof buf - 1);
			close(fd);
			buf[n > 0 ? n : 0] = '\0';
			__atomic_store_n(&offset_us, parse(buf), __ATOMIC_RELAXED);
		}
	}
	return __atomic_load_n(&offset_us, __ATOMIC_RELAXED);
}

int clock_gettime(clockid_t clk, struct timespec *ts)
{
	long long ns;
	int r;
	if (!real_clock_gettime)
		shim_init();
	r = real_clock_gettime(clk, ts);
	if (r == 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)) {
		ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + offset() * 1000LL;
		ts->tv_sec = ns / 1000000000LL;
		ts->tv_nsec = ns % 1000000000LL;
		if (ts->tv_nsec < 0) {
			ts->tv_sec--;
			ts->tv_nsec += 1000000000LL;
		}
	}
	return r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	struct timespec ts;
	(void)tz;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return -1;
	tv->tv_sec = ts.tv_sec;
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}

time_t time(time_t *t)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (t)
		*t = ts.tv_sec;
	return ts.tv_sec;
}
