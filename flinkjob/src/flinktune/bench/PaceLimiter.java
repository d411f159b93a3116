package flinktune.bench;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.apache.flink.api.connector.source.lib.NumberSequenceSource.NumberSequenceSplit;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiter;

/**
 * Gates a source subtask on its {@link Pace}: a record may go when it is due.
 *
 * <p>When the next record is due (or overdue: a backlog) the permit is an already-completed
 * future, so there is no thread hop per record (Flink's own limiter completes every permit on
 * another thread, which cannot hold tens of thousands of records per second on two cores).
 * When the source is ahead of its schedule it waits at least {@link #MIN_WAIT_MS}, so records
 * leave in batches of a few ms and the task counts the wait as idle time, not busy time.
 */
final class PaceLimiter implements RateLimiter<NumberSequenceSplit> {
    static final long MIN_WAIT_MS = 5;
    private static final CompletableFuture<Void> NOW = CompletableFuture.completedFuture(null);
    private static final ScheduledExecutorService TIMER = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "flinktune-pace-timer");
        t.setDaemon(true);
        return t;
    });

    private final Pace pace;

    PaceLimiter(Pace pace) {
        this.pace = pace;
    }

    @Override
    public CompletionStage<Void> acquire(int requestSize) {
        long now = System.currentTimeMillis();
        long due = pace.nextDueMs(now);
        if (due <= now) {
            return NOW;
        }
        CompletableFuture<Void> later = new CompletableFuture<>();
        TIMER.schedule(() -> later.complete(null), Math.max(MIN_WAIT_MS, due - now), TimeUnit.MILLISECONDS);
        return later;
    }
}
