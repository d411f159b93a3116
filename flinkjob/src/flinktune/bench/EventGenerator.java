package flinktune.bench;

import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.connector.datagen.source.GeneratorFunction;

/**
 * Turns a sequence number into an event (key, scheduled event time ms, payload).
 *
 * <p>The event time is the record's scheduled time from {@link Pace}, not the time it was
 * read, so a source that falls behind produces old events and the job's latency grows like a
 * consumer behind a queue. Keys are spread with a multiplicative hash of the sequence number.
 */
final class EventGenerator implements GeneratorFunction<Long, Tuple3<Long, Long, Long>> {
    private final int keys;
    private final Pace pace;

    EventGenerator(int keys, Pace pace) {
        this.keys = keys;
        this.pace = pace;
    }

    @Override
    public void open(SourceReaderContext context) {
        context.metricGroup().setPendingRecordsGauge(pace::pendingRecords);
        context.metricGroup().gauge("offeredRate", pace::offeredRate);
    }

    @Override
    public Tuple3<Long, Long, Long> map(Long seq) {
        long key = Math.floorMod(seq * 0x9E3779B97F4A7C15L, (long) keys);
        return Tuple3.of(key, pace.advance(), seq);
    }
}
