package flinktune.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The schedule of one source subtask: when its next record is due, in wall-clock time.
 *
 * <p>The total target rate (records/s over all source subtasks) is read from a rate file every
 * 500 ms, so a driver can follow a trace without restarting the job. Each record is due
 * 1000 * parallelism / rate ms after the previous one. A source that falls behind its schedule
 * (back pressure, too little capacity) builds a backlog exactly like a consumer behind a queue:
 * {@link #pendingRecords()} is that backlog, and it catches up at full speed once it can.
 * Not thread-safe except for the two gauges, which read volatile fields.
 */
final class Pace {
    private static final long REREAD_MS = 500;

    private final Path rateFile;
    private final int parallelism;
    private volatile double totalRate;
    private double dueMs;
    private long lastRead;
    private volatile double lastDueMs;

    Pace(String rateFile, double initialRate, int parallelism) {
        this.rateFile = rateFile == null || rateFile.isEmpty() ? null : Path.of(rateFile);
        this.parallelism = Math.max(1, parallelism);
        this.totalRate = initialRate;
        this.dueMs = System.currentTimeMillis();
        this.lastDueMs = dueMs;
        reread(System.currentTimeMillis());
    }

    private void reread(long now) {
        lastRead = now;
        if (rateFile == null) {
            return;
        }
        try {
            String text = new String(Files.readAllBytes(rateFile), StandardCharsets.US_ASCII).trim();
            if (!text.isEmpty()) {
                totalRate = Math.max(0.0, Double.parseDouble(text));
            }
        } catch (IOException | NumberFormatException e) {
            // Keep the last rate: a driver rewrites the file by rename, but a bad file must not kill the job.
        }
    }

    /** Wall-clock ms at which the next record is due; refreshes the rate file when it is old. */
    long nextDueMs(long now) {
        if (now - lastRead >= REREAD_MS) {
            reread(now);
        }
        if (totalRate <= 0.0) {
            // Paused: keep the schedule at "now" so a later rate does not release a burst.
            dueMs = Math.max(dueMs, now);
            return now + REREAD_MS;
        }
        return (long) dueMs;
    }

    /** Mark one record as emitted and return its scheduled (event) time in ms. */
    long advance() {
        long scheduled = (long) dueMs;
        double perSubtask = totalRate / parallelism;
        dueMs += perSubtask > 0 ? 1000.0 / perSubtask : 0.0;
        lastDueMs = dueMs;
        return scheduled;
    }

    /** Records this subtask should have emitted by now but has not (its share of the consumer lag). */
    long pendingRecords() {
        double behindMs = System.currentTimeMillis() - lastDueMs;
        return behindMs <= 0 ? 0L : (long) (behindMs * (totalRate / parallelism) / 1000.0);
    }

    /** This subtask's share of the offered rate, records/s. */
    double offeredRate() {
        return totalRate / parallelism;
    }
}
