package flinktune.bench;

import java.util.ArrayDeque;
import java.util.Arrays;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.MetricGroup;

/**
 * Measures end-to-end latency of window results: now minus the window's end (event time).
 *
 * <p>Because event times are scheduled times (see {@link Pace}), this includes the time a record
 * waited in a backlog before the source read it, the out-of-orderness bound and the window
 * firing delay: what a user of the results sees. Exposes gauges {@code latencyP50Ms},
 * {@code latencyP95Ms}, {@code latencyP99Ms} over the results of the last {@link #WINDOW_MS}
 * ms; with no result in that span they report the age of the newest result (a stalled job's
 * latency keeps growing instead of freezing).
 */
public final class LatencyMeter extends RichMapFunction<Tuple3<Long, Long, Long>, Tuple3<Long, Long, Long>> {
    static final long WINDOW_MS = 10_000;
    private static final int MAX_SAMPLES = 50_000;

    private transient ArrayDeque<long[]> samples;
    private transient long newestEnd;

    @Override
    public void open(OpenContext ctx) {
        samples = new ArrayDeque<>();
        newestEnd = System.currentTimeMillis();
        MetricGroup group = getRuntimeContext().getMetricGroup();
        group.gauge("latencyP50Ms", (Gauge<Double>) () -> quantile(0.50));
        group.gauge("latencyP95Ms", (Gauge<Double>) () -> quantile(0.95));
        group.gauge("latencyP99Ms", (Gauge<Double>) () -> quantile(0.99));
    }

    @Override
    public Tuple3<Long, Long, Long> map(Tuple3<Long, Long, Long> result) {
        long now = System.currentTimeMillis();
        synchronized (this) {
            samples.addLast(new long[] {now, now - result.f1});
            newestEnd = Math.max(newestEnd, result.f1);
            if (samples.size() > MAX_SAMPLES) {
                samples.removeFirst();
            }
        }
        return result;
    }

    private synchronized double quantile(double q) {
        long now = System.currentTimeMillis();
        while (!samples.isEmpty() && now - samples.peekFirst()[0] > WINDOW_MS) {
            samples.removeFirst();
        }
        if (samples.isEmpty()) {
            return (double) (now - newestEnd);
        }
        long[] values = new long[samples.size()];
        int i = 0;
        for (long[] s : samples) {
            values[i++] = s[1];
        }
        Arrays.sort(values);
        return (double) values[Math.min(values.length - 1, (int) Math.ceil(q * values.length) - 1 < 0 ? 0 : (int) Math.ceil(q * values.length) - 1)];
    }
}
