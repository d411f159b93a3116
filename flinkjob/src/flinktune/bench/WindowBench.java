package flinktune.bench;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;

/**
 * The benchmark job: paced source -> keyBy -> tumbling event-time window aggregate -> latency meter -> sink.
 *
 * <p>Shaped like the Yahoo Streaming Benchmark's keyed window count, with a tunable CPU cost per
 * record ({@code --work} loop iterations in the aggregate) so that capacity differences between
 * parallelism 1 and 2 fall in the 5-60k records/s range on two cores, and an optional wait per
 * record ({@code --wait-us}: an external lookup's latency) that bounds a subtask's capacity without
 * spending CPU, so that several jobs can each need a scale-up on a machine of two cores. Arguments
 * (all optional): {@code --rate-file PATH} (total records/s, re-read every 0.5 s), {@code --rate N}
 * (initial rate), {@code --keys N}, {@code --work N}, {@code --wait-us N}, {@code --window-ms N},
 * {@code --name NAME}.
 * Operators carry uids so savepoints restore across parallelism changes.
 */
public final class WindowBench {
    private WindowBench() {}

    static Map<String, String> parse(String[] args) {
        Map<String, String> out = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("argument " + i + " (" + args[i] + "): expected --key value pairs");
            }
            out.put(args[i].substring(2), args[++i]);
        }
        return out;
    }

    /**
     * Sum of a deliberately expensive hash per record (the job's CPU cost knob), then the record's wait.
     * Waits accrue and are slept in whole milliseconds, the time actually slept paid off against them,
     * so the mean wait per record is {@code waitUs} whatever the sleep granularity.
     */
    static final class WorkAggregate implements AggregateFunction<Tuple3<Long, Long, Long>, long[], long[]> {
        private static final long SLEEP_CHUNK_NS = 1_000_000L;
        private final int work;
        private final long waitNs;
        private transient long owedNs;

        WorkAggregate(int work, long waitUs) {
            this.work = work;
            this.waitNs = waitUs * 1000L;
        }

        private void waitForRecord() {
            owedNs += waitNs;
            if (owedNs < SLEEP_CHUNK_NS) {
                return;
            }
            long start = System.nanoTime();
            try {
                Thread.sleep(owedNs / 1_000_000L, (int) (owedNs % 1_000_000L));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            owedNs -= System.nanoTime() - start;
        }

        @Override
        public long[] createAccumulator() {
            return new long[2];
        }

        @Override
        public long[] add(Tuple3<Long, Long, Long> e, long[] acc) {
            long h = e.f2;
            for (int i = 0; i < work; i++) {
                h = h * 6364136223846793005L + 1442695040888963407L;
                h ^= h >>> 29;
            }
            if (waitNs > 0) {
                waitForRecord();
            }
            acc[0] += 1;
            acc[1] += h;
            return acc;
        }

        @Override
        public long[] getResult(long[] acc) {
            return acc;
        }

        @Override
        public long[] merge(long[] a, long[] b) {
            return new long[] {a[0] + b[0], a[1] + b[1]};
        }
    }

    /** Emits (key, window end ms, count). */
    static final class EmitWindow extends ProcessWindowFunction<long[], Tuple3<Long, Long, Long>, Long, TimeWindow> {
        @Override
        public void process(Long key, Context ctx, Iterable<long[]> accs, Collector<Tuple3<Long, Long, Long>> out) {
            long[] acc = accs.iterator().next();
            out.collect(Tuple3.of(key, ctx.window().getEnd(), acc[0]));
        }
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> a = parse(args);
        String rateFile = a.getOrDefault("rate-file", "");
        double rate = Double.parseDouble(a.getOrDefault("rate", "1000"));
        int keys = Integer.parseInt(a.getOrDefault("keys", "1000"));
        int work = Integer.parseInt(a.getOrDefault("work", "20000"));
        long waitUs = Long.parseLong(a.getOrDefault("wait-us", "0"));
        long windowMs = Long.parseLong(a.getOrDefault("window-ms", "2000"));
        String name = a.getOrDefault("name", "flinktune-bench");

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        WatermarkStrategy<Tuple3<Long, Long, Long>> watermarks = WatermarkStrategy
                .<Tuple3<Long, Long, Long>>forBoundedOutOfOrderness(Duration.ofMillis(200))
                .withTimestampAssigner((e, ts) -> e.f1);
        env.fromSource(new PacedSource(rateFile, rate, keys), watermarks, "PacedSource").uid("paced-source")
                .keyBy(e -> e.f0)
                .window(TumblingEventTimeWindows.of(Duration.ofMillis(windowMs)))
                .aggregate(new WorkAggregate(work, waitUs), new EmitWindow()).uid("window-agg").name("WindowAgg")
                .map(new LatencyMeter()).uid("latency-meter").name("LatencyMeter")
                .sinkTo(new DiscardingSink<>()).uid("sink").name("Sink");
        env.execute(name);
    }
}
