/* parallel_for.c — a persistent pthread pool for CPU kernels (the host API's parallel_for).
 * One job at a time: the caller publishes it, workers and the caller take chunks from a shared
 * counter. A second caller, or a call from inside a body, finds the pool busy and runs inline,
 * so nested and concurrent use never deadlocks. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "host_services.h"

#define DLOP_MAX_THREADS 1024

typedef struct parallel_job {
  dlop_parallel_body body;
  void *context;
  int64_t count;
  int64_t chunk;
  int64_t num_chunks;
} parallel_job;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t work_ready; /* workers wait for a new generation */
  pthread_cond_t work_done;  /* the caller waits for active to drop to 0 */
  int started;
  int workers;
  int busy;           /* a caller owns the pool */
  int active;         /* workers currently inside a job */
  uint64_t generation;
  parallel_job job;
  atomic_llong next_chunk;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
            .work_ready = PTHREAD_COND_INITIALIZER,
            .work_done = PTHREAD_COND_INITIALIZER};

static pthread_once_t threads_once = PTHREAD_ONCE_INIT;
static int32_t thread_count = 1;

static void count_threads(void) {
  const char *text = getenv("DLOP_NUM_THREADS");
  long value = 0;
  if (text && *text) {
    char *end;
    value = strtol(text, &end, 10);
    if (*end != '\0' || value < 1) {
      dlop__warn("DLOP_NUM_THREADS=\"%s\" is not a positive integer; using the CPU count", text);
      value = 0;
    }
  }
  if (value == 0) value = sysconf(_SC_NPROCESSORS_ONLN);
  if (value < 1) value = 1;
  if (value > DLOP_MAX_THREADS) value = DLOP_MAX_THREADS;
  thread_count = (int32_t)value;
}

int32_t dlop__cpu_threads(void) {
  pthread_once(&threads_once, count_threads);
  return thread_count;
}

static void run_chunks(const parallel_job *job) {
  for (;;) {
    int64_t chunk = atomic_fetch_add(&pool.next_chunk, 1);
    if (chunk >= job->num_chunks) return;
    int64_t begin = chunk * job->chunk;
    int64_t end = begin + job->chunk < job->count ? begin + job->chunk : job->count;
    job->body(job->context, begin, end);
  }
}

static void *worker_main(void *unused) {
  (void)unused;
  pthread_mutex_lock(&pool.lock);
  uint64_t seen = pool.generation;
  for (;;) {
    while (pool.generation == seen) pthread_cond_wait(&pool.work_ready, &pool.lock);
    seen = pool.generation;
    pool.active++;
    parallel_job job = pool.job; /* stable while active > 0: a new job waits for active == 0 */
    pthread_mutex_unlock(&pool.lock);
    run_chunks(&job);
    pthread_mutex_lock(&pool.lock);
    if (--pool.active == 0) pthread_cond_broadcast(&pool.work_done);
  }
  return NULL;
}

/* In a forked child only the forking thread exists: forget the parent's workers. */
static void reset_after_fork(void) {
  pthread_mutex_init(&pool.lock, NULL);
  pthread_cond_init(&pool.work_ready, NULL);
  pthread_cond_init(&pool.work_done, NULL);
  pool.started = 0;
  pool.workers = 0;
  pool.busy = 0;
  pool.active = 0;
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void install_atfork(void) { pthread_atfork(NULL, NULL, reset_after_fork); }

/* Start the workers once (lock held). Fewer start if the system refuses threads. */
static void start_workers_locked(int wanted) {
  pool.started = 1;
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  for (int i = 0; i < wanted; i++) {
    pthread_t thread;
    if (pthread_create(&thread, &attributes, worker_main, NULL) != 0) break;
    pool.workers++;
  }
  pthread_attr_destroy(&attributes);
}

int dlop__parallel_for(int64_t count, int64_t grain, dlop_parallel_body body, void *context) {
  if (body == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "parallel_for: body is NULL");
  if (count < 0)
    return dlop__error(DLOP_INVALID_ARGUMENT, "parallel_for: count %lld is negative",
                       (long long)count);
  if (count == 0) return DLOP_OK;
  if (grain < 1) grain = 1;
  int32_t threads = dlop__cpu_threads();
  if (threads <= 1 || count < 2 * grain) {
    body(context, 0, count);
    return DLOP_OK;
  }
  pthread_once(&atfork_once, install_atfork);
  pthread_mutex_lock(&pool.lock);
  if (pool.busy) { /* another caller, or we are inside a body: run here */
    pthread_mutex_unlock(&pool.lock);
    body(context, 0, count);
    return DLOP_OK;
  }
  if (!pool.started) start_workers_locked(threads - 1);
  pool.busy = 1;
  while (pool.active > 0) pthread_cond_wait(&pool.work_done, &pool.lock);
  /* About four chunks per thread balances uneven bodies without tiny chunks. */
  int64_t chunk = (count + (int64_t)threads * 4 - 1) / ((int64_t)threads * 4);
  if (chunk < grain) chunk = grain;
  pool.job = (parallel_job){body, context, count, chunk, (count + chunk - 1) / chunk};
  atomic_store(&pool.next_chunk, 0);
  pool.generation++;
  pthread_cond_broadcast(&pool.work_ready);
  parallel_job job = pool.job;
  pthread_mutex_unlock(&pool.lock);

  run_chunks(&job);

  pthread_mutex_lock(&pool.lock);
  while (pool.active > 0) pthread_cond_wait(&pool.work_done, &pool.lock);
  pool.busy = 0;
  pthread_mutex_unlock(&pool.lock);
  return DLOP_OK;
}
